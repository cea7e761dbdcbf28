package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/pipefeed/pipe/source/remote"
)

func newLs() *cobra.Command {
	var o remote.Options
	var asJSON bool
	c := &cobra.Command{
		Use:   "ls PATTERN",
		Short: "list what a source path expands to: the objects of an s3:// or http(s):// URL, or local files, with sizes",
		Long: `ls expands PATTERN as tfrecord and webdataset paths are: brace groups first
(shard-{000000..001023}.tar, {train,val}-*), then each glob matched by listing
(an s3:// bucket from the prefix before the glob; local files), and prints each
object with its size and ETag, then the count and total. A name without a glob
must exist. Credentials and the endpoint come from the AWS environment
variables and files unless the flags set them.`,
		Args: exactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			objs, err := list(c, args[0], o)
			if err != nil {
				if errors.Is(err, remote.ErrBadURL) {
					return usageError{err}
				}
				return err
			}
			out := c.OutOrStdout()
			for i := range objs {
				objs[i].URL = remote.Redact(objs[i].URL)
			}
			if asJSON {
				return json.NewEncoder(out).Encode(objs)
			}
			w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
			var total int64
			for _, ob := range objs {
				fmt.Fprintf(w, "%d\t  %s\t  %s\t\n", ob.Size, ob.ETag, ob.URL)
				total += ob.Size
			}
			w.Flush()
			fmt.Fprintf(out, "%d object(s), %d bytes (%.1f MB)\n", len(objs), total, float64(total)/1e6)
			return nil
		},
	}
	c.Flags().StringVar(&o.Endpoint, "endpoint", "", "S3 endpoint (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)")
	c.Flags().StringVar(&o.Region, "region", "", "S3 region (default $AWS_REGION)")
	c.Flags().BoolVar(&o.PathStyle, "path-style", false, "address buckets as endpoint/bucket/key")
	c.Flags().BoolVar(&asJSON, "json", false, "print a JSON array of {URL, Size, ETag}")
	return c
}

// list expands pattern: a URL through its store, local names with braces
// and globs.
func list(c *cobra.Command, pattern string, o remote.Options) ([]remote.Object, error) {
	if remote.IsURL(pattern) {
		s := remote.New(o)
		defer s.Close()
		return s.List(c.Context(), pattern)
	}
	globs, err := remote.ExpandBraces(pattern)
	if err != nil {
		return nil, err
	}
	var objs []remote.Object
	for _, g := range globs {
		names, err := filepath.Glob(g)
		if err != nil {
			return nil, usageError{err}
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%s: no such files", g)
		}
		sort.Strings(names)
		for _, n := range names {
			st, err := os.Stat(n)
			if err != nil {
				return nil, err
			}
			objs = append(objs, remote.Object{URL: n, Size: st.Size()})
		}
	}
	return objs, nil
}
