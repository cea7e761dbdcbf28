module github.com/pipefeed/pipe

go 1.26
