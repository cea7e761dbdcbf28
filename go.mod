module github.com/pipefeed/pipe

go 1.26

require (
	github.com/alitto/pond/v2 v2.7.1
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/klauspost/compress v1.20.3
)
