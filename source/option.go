package source

import (
	"errors"
	"fmt"
	"slices"

	"github.com/pipefeed/pipe/fields"
)

// Option is a setting of a source's constructor. One type serves every
// source, so a setting several of them take (WithRemote, WithIndexDir) has
// one name; each option's doc says which sources take it, and a
// constructor given one it does not take fails, naming it, rather than
// ignoring it. An option whose argument cannot be right (an empty feature
// key, a negative label offset) fails the constructor too, with the
// option's name.
type Option struct {
	name string
	set  func(*options) error
}

// options are every constructor's settings; each reads its own.
type options struct {
	cifar    cifarConfig
	folder   folderConfig
	tf       tfConfig
	wds      wdsConfig
	shuffled bool // Synthetic

	remote   *Remote
	indexDir string
	fields   *fields.Schema
}

// apply applies opts for the constructor what, which takes the options
// named in takes.
func apply(what string, opts []Option, takes ...string) (*options, error) {
	o := &options{}
	for _, opt := range opts {
		if opt.set == nil {
			return nil, fmt.Errorf("%s: the zero Option: make options with the With… functions", what)
		}
		if !slices.Contains(takes, opt.name) {
			return nil, fmt.Errorf("%s: %w: %s is not one of its options (%v)", what, ErrOption, opt.name, takes)
		}
		if err := opt.set(o); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", what, opt.name, err)
		}
	}
	return o, nil
}

// ErrOption means a constructor was given an option it does not take.
var ErrOption = errors.New("option does not apply")

// WithRemote sets where files named by URLs (s3://, http://, https://)
// are fetched from and cached. Default: the environment's S3 settings and
// the default shard cache. For OpenFolder, OpenTFRecord, OpenWebDataset.
func WithRemote(r *Remote) Option {
	return Option{"WithRemote", func(o *options) error { o.remote = r; return nil }}
}

// WithIndexDir sets where offset indexes and decompressed copies of GZIP
// files go (a directory created if missing). Default:
// $PIPE_CACHE/tfrecord or $PIPE_CACHE/webdataset (~/.cache/pipe/… without
// $PIPE_CACHE). For OpenTFRecord, OpenWebDataset.
func WithIndexDir(dir string) Option {
	return Option{"WithIndexDir", func(o *options) error {
		if dir == "" {
			return errors.New("an empty directory: leave the option out for the default")
		}
		o.indexDir = dir
		return nil
	}}
}

// WithFields asks for the fields of schema (a pipeline's fields stage):
// Read fills Record.Fields, one Value per schema field, from each field's
// key (Field.Key, or the source's default for its kind). A source refuses a
// schema with a field it cannot read, naming it. For the sources whose doc
// says they take it.
func WithFields(schema *fields.Schema) Option {
	return Option{"WithFields", func(o *options) error {
		if schema == nil {
			return errors.New("a nil schema: leave the option out for an image and a label")
		}
		if err := schema.Check(); err != nil {
			return err
		}
		o.fields = schema
		return nil
	}}
}
