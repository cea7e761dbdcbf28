package source

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestOptionsCheckedByEachSource: a constructor refuses an option it does
// not take and an option whose argument cannot be right, naming both the
// source and the option, before it touches a file.
func TestOptionsCheckedByEachSource(t *testing.T) {
	ctx := context.Background()
	missing := "/nonexistent/path"
	for _, c := range []struct {
		name  string
		open  func() error
		holds []string
	}{
		{"tfrecord given a webdataset option", func() error {
			_, err := OpenTFRecord(ctx, missing, WithJSONLabel("cls"))
			return err
		}, []string{"tfrecord: ", "WithJSONLabel is not one of its options"}},
		{"cifar10 given coarse labels", func() error {
			_, err := OpenCIFAR10(ctx, missing, Train, WithCoarseLabels())
			return err
		}, []string{"cifar10: ", "WithCoarseLabels is not one of its options"}},
		{"synthetic given a remote", func() error {
			_, err := NewSynthetic(10, Train, 0, WithRemote(nil))
			return err
		}, []string{"synthetic: ", "WithRemote"}},
		{"a negative label offset", func() error {
			_, err := OpenTFRecord(ctx, missing, WithLabelOffset(-1))
			return err
		}, []string{"tfrecord: WithLabelOffset: offset -1"}},
		{"an empty feature key", func() error {
			_, err := OpenTFRecord(ctx, missing, WithFeatureKeys("", "label"))
			return err
		}, []string{"tfrecord: WithFeatureKeys: "}},
		{"an empty index directory", func() error {
			_, err := OpenWebDataset(ctx, missing, WithIndexDir(""))
			return err
		}, []string{"webdataset: WithIndexDir: "}},
		{"an empty labels path", func() error {
			_, err := OpenFolder(ctx, missing, WithLabels(""))
			return err
		}, []string{"image_folder: WithLabels: "}},
		{"the zero Option", func() error {
			_, err := OpenFolder(ctx, missing, Option{})
			return err
		}, []string{"image_folder: the zero Option"}},
	} {
		err := c.open()
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, h := range c.holds {
			if !strings.Contains(err.Error(), h) {
				t.Errorf("%s: %v; want it to hold %q", c.name, err, h)
			}
		}
		if strings.Contains(err.Error(), missing) {
			t.Errorf("%s: %v: the option was not checked before the path", c.name, err)
		}
	}
	if _, err := OpenTFRecord(ctx, missing, WithJSONLabel("cls")); !errors.Is(err, ErrOption) {
		t.Errorf("an option a source does not take: %v, want ErrOption", err)
	}
}
