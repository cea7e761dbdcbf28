"""The stages of pipe's registry as Pipeline methods, and their specs.

Generated from ``pipe stages --json`` by ``python -m pipefeed._gen``: do
not edit; generate it again (see _gen) when pipe's stages change.
"""

from __future__ import annotations

import json
import os
from typing import Any, Literal, Optional, Sequence, TypeVar, Union, overload

_P = TypeVar("_P", bound="Stages")

STAGES = json.loads(r'''
[
  {
    "name": "cifar10",
    "kind": "source",
    "doc": "CIFAR-10 binary distribution: 32×32 RGB, 10 classes (50,000 train, 10,000 test)",
    "params": [
      {
        "name": "path",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the official .tar.gz, its extracted directory, or one batch file"
      },
      {
        "name": "split",
        "type": "enum",
        "default": "train",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "which part of the dataset"
      },
      {
        "name": "download",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "fetch and verify the official archive into cache_dir when no path is given"
      },
      {
        "name": "cache_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "where downloads go (default $PIPE_CACHE or ~/.cache/pipe)"
      },
      {
        "name": "mirror",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "download from this URL instead of the official one (needs checksum)"
      },
      {
        "name": "checksum",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the mirror's md5:<hex> or sha256:<hex>"
      }
    ]
  },
  {
    "name": "cifar100",
    "kind": "source",
    "doc": "CIFAR-100 binary distribution: 32×32 RGB, 100 fine or 20 coarse classes",
    "params": [
      {
        "name": "path",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the official .tar.gz, its extracted directory, or one batch file"
      },
      {
        "name": "split",
        "type": "enum",
        "default": "train",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "which part of the dataset"
      },
      {
        "name": "download",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "fetch and verify the official archive into cache_dir when no path is given"
      },
      {
        "name": "cache_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "where downloads go (default $PIPE_CACHE or ~/.cache/pipe)"
      },
      {
        "name": "mirror",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "download from this URL instead of the official one (needs checksum)"
      },
      {
        "name": "checksum",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the mirror's md5:<hex> or sha256:<hex>"
      },
      {
        "name": "labels",
        "type": "enum",
        "default": "fine",
        "required": false,
        "positional": false,
        "enum": [
          "fine",
          "coarse"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "which label byte to use"
      }
    ]
  },
  {
    "name": "image_folder",
    "kind": "source",
    "doc": "JPEG/PNG files: one sub-directory per class (torchvision ImageFolder, ILSVRC train/), or a flat directory with labels= (ImageNet val); needs decode",
    "params": [
      {
        "name": "path",
        "type": "string",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the directory, or a URL: s3://bucket/train/ (class folders found by listing), https://host/val/ (with labels=), each file fetched into the shard cache"
      },
      {
        "name": "labels",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "flat layout: a CSV of file,label lines (a header is skipped), a path or URL; without classes= the classes are 0..the largest label (past 1,024, half must appear)"
      },
      {
        "name": "classes",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "a CSV of label,name lines naming the classes (e.g. ILSVRC synsets), a path or URL"
      },
      {
        "name": "split",
        "type": "enum",
        "default": "train",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "eval split=test reads path/../val (or path/../test) when it exists"
      },
      {
        "name": "endpoint",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)"
      },
      {
        "name": "region",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)"
      },
      {
        "name": "path_style",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "address buckets as endpoint/bucket/key, as most S3-compatible servers want"
      },
      {
        "name": "cache_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)"
      },
      {
        "name": "cache_size",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)"
      },
      {
        "name": "concurrency",
        "type": "int",
        "default": "8",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": null,
        "why": "",
        "doc": "shards fetched at once for URL paths, each one streaming 1 MiB buffer"
      },
      {
        "name": "retry_for",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)"
      }
    ]
  },
  {
    "name": "synthetic",
    "kind": "source",
    "doc": "generated CIFAR-shaped data (3×32×32, 10 learnable classes); needs no files or network",
    "params": [
      {
        "name": "n",
        "type": "int",
        "default": "50000",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 4294967295,
        "why": "stored epoch orders hold positions in 32 bits",
        "doc": "number of samples"
      },
      {
        "name": "split",
        "type": "enum",
        "default": "train",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "which part of the dataset"
      },
      {
        "name": "seed",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "generator seed (the data, not the augmentation)"
      },
      {
        "name": "shuffle_labels",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "labels independent of images: a control that nothing can learn"
      }
    ]
  },
  {
    "name": "tfrecord",
    "kind": "source",
    "doc": "tf.train.Example records in TFRecord files (plain or GZIP, both CRC-32Cs checked, offsets indexed once); needs decode",
    "params": [
      {
        "name": "path",
        "type": "string",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the files: a glob with braces (data/train-{00000..01023}-of-01024, data/train-*), or a URL (s3://bucket/train-*, https://host/train-{0..9}.tfrecord) fetched into the shard cache"
      },
      {
        "name": "image_key",
        "type": "string",
        "default": "image/encoded",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the bytes feature holding the encoded image"
      },
      {
        "name": "label_key",
        "type": "string",
        "default": "image/class/label",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the int64 feature holding the label"
      },
      {
        "name": "label_offset",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "labels are below source.MaxClasses",
        "doc": "subtracted from labels (build_image_data numbers classes from 1: use 1)"
      },
      {
        "name": "index_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "where offset indexes and decompressed GZIP copies go (default $PIPE_CACHE/tfrecord)"
      },
      {
        "name": "split",
        "type": "enum",
        "default": "train",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "eval split=test reads the path with train replaced by validation (or val, test)"
      },
      {
        "name": "endpoint",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)"
      },
      {
        "name": "region",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)"
      },
      {
        "name": "path_style",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "address buckets as endpoint/bucket/key, as most S3-compatible servers want"
      },
      {
        "name": "cache_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)"
      },
      {
        "name": "cache_size",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)"
      },
      {
        "name": "concurrency",
        "type": "int",
        "default": "8",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": null,
        "why": "",
        "doc": "shards fetched at once for URL paths, each one streaming 1 MiB buffer"
      },
      {
        "name": "retry_for",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)"
      }
    ]
  },
  {
    "name": "webdataset",
    "kind": "source",
    "doc": "WebDataset tar shards (plain, .tar.gz, .tgz): members grouped by key, image from .jpg/.jpeg/.png, label from .cls or .json; needs decode",
    "params": [
      {
        "name": "path",
        "type": "string",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the shards: a glob with braces (data/shard-{000000..001023}.tar, data/shard-*.tar), or a URL (s3://bucket/shard-*.tar, https://host/shard-{000..099}.tar) fetched into the shard cache"
      },
      {
        "name": "label_field",
        "type": "string",
        "default": "label",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the .json field holding the label, for samples without a .cls member"
      },
      {
        "name": "index_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "where gzipped shards are decompressed once (default $PIPE_CACHE/webdataset)"
      },
      {
        "name": "endpoint",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)"
      },
      {
        "name": "region",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)"
      },
      {
        "name": "path_style",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "address buckets as endpoint/bucket/key, as most S3-compatible servers want"
      },
      {
        "name": "cache_dir",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)"
      },
      {
        "name": "cache_size",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)"
      },
      {
        "name": "concurrency",
        "type": "int",
        "default": "8",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": null,
        "why": "",
        "doc": "shards fetched at once for URL paths, each one streaming 1 MiB buffer"
      },
      {
        "name": "retry_for",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)"
      }
    ]
  },
  {
    "name": "affine",
    "kind": "stage",
    "doc": "a random rotation, translation, scale and shear about the centre (torchvision RandomAffine)",
    "params": [
      {
        "name": "degrees",
        "type": "float",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 180,
        "why": "",
        "doc": "the angle is uniform in [-degrees, degrees], clockwise positive (as torchvision's affine)"
      },
      {
        "name": "translate",
        "type": "floats",
        "default": "0,0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "largest shifts tx,ty as fractions of the width and height, each in [0, 1]; the shift is a whole number of pixels"
      },
      {
        "name": "scale",
        "type": "floats",
        "default": "1,1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range min,max the scale is drawn from uniformly, 0 < min ≤ max ≤ 100"
      },
      {
        "name": "shear",
        "type": "floats",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "shear angles in degrees: s (x in [-s, s]), x_min,x_max, or x_min,x_max,y_min,y_max; each in (-90, 90)"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "nearest",
        "required": false,
        "positional": false,
        "enum": [
          "nearest",
          "bilinear"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "nearest or bilinear sampling (torch grid_sample), torchvision's default nearest"
      },
      {
        "name": "fill",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 255,
        "why": "",
        "doc": "pixel value of the area the image no longer covers"
      }
    ]
  },
  {
    "name": "batch",
    "kind": "stage",
    "doc": "group samples into batches written straight into reusable slabs",
    "params": [
      {
        "name": "size",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 16777216,
        "why": "256 times the largest batch trained on ImageNet",
        "doc": "samples per batch"
      },
      {
        "name": "drop_last",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "leave out the final short batch of each epoch"
      }
    ]
  },
  {
    "name": "cache",
    "kind": "stage",
    "doc": "store the output of every stage before it in a Badger directory and read it back instead of recomputing it",
    "params": [
      {
        "name": "dir",
        "type": "string",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "cache directory (created if missing; one pipe process at a time)"
      },
      {
        "name": "epochs",
        "type": "int",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1048576,
        "why": "so that epochs × steps fits a step counter",
        "doc": "distinct epochs cached after random stages; epoch e ≥ epochs reuses e mod epochs (data echoing)"
      },
      {
        "name": "shard",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 65536,
        "why": "an entry is decompressed whole",
        "doc": "samples per cache entry (0: about 1 MiB of images after random stages, 256 KiB otherwise, at most 256)"
      },
      {
        "name": "ahead",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "so that epochs × steps fits a step counter",
        "doc": "epochs pipe run warms in the background ahead of the one being read"
      },
      {
        "name": "memory",
        "type": "int",
        "default": "128",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 16777216,
        "why": "16 TiB, more than any machine",
        "doc": "MiB of decoded entries kept in memory"
      }
    ]
  },
  {
    "name": "center_crop",
    "kind": "stage",
    "doc": "the central size×size window, zero-padded if the image is smaller (torchvision CenterCrop)",
    "params": [
      {
        "name": "size",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "side of the square crop"
      }
    ]
  },
  {
    "name": "color_jitter",
    "kind": "stage",
    "doc": "random brightness, contrast, saturation and hue in a random order (torchvision ColorJitter)",
    "params": [
      {
        "name": "brightness",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "factor drawn from [max(0, 1-v), 1+v]"
      },
      {
        "name": "contrast",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "factor drawn from [max(0, 1-v), 1+v], around the mean grey"
      },
      {
        "name": "saturation",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "factor drawn from [max(0, 1-v), 1+v], around each pixel's grey"
      },
      {
        "name": "hue",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 0.5,
        "why": "",
        "doc": "shift of each pixel's hue drawn from [-v, v] of the colour wheel (torchvision's adjust_hue)"
      }
    ]
  },
  {
    "name": "cutmix",
    "kind": "stage",
    "doc": "paste a box of the previous sample of a batch into each sample, sized by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision CutMix)",
    "params": [
      {
        "name": "alpha",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "λ ~ Beta(alpha, alpha), alpha > 0 (torchvision's default 1; its reference recipes use 0.2 for mixup, 1 for cutmix)"
      },
      {
        "name": "p",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability that a batch is mixed (one that is not gets one-hot targets)"
      },
      {
        "name": "num_classes",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "labels are below source.MaxClasses",
        "doc": "length of the targets; 0: the source's classes"
      }
    ]
  },
  {
    "name": "decode",
    "kind": "stage",
    "doc": "JPEG/PNG bytes to RGB pixels (greyscale and CMYK become RGB); right after an image source, before a cache that should skip decoding",
    "params": [
      {
        "name": "reduce",
        "type": "bool",
        "default": "true",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "decode only the window a following resize/random_resized_crop reads at the smallest DCT scale (1/8, 1/4, 1/2) that keeps it at least its output size; false: at full scale"
      },
      {
        "name": "max_pixels",
        "type": "int",
        "default": "67108864",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1073741824,
        "why": "the square of the longest side pipe decodes",
        "doc": "largest image decoded, width × height (the default, 2^26, is an 8192×8192 square, above a 61-MP photograph); checked from the header before anything is allocated: a larger image is a corrupt record, which on_error=skip skips"
      }
    ]
  },
  {
    "name": "eval",
    "kind": "stage",
    "doc": "evaluate the trained model on another split of the source (top-1 accuracy and loss), without augmentation",
    "params": [
      {
        "name": "split",
        "type": "enum",
        "default": "test",
        "required": false,
        "positional": false,
        "enum": [
          "train",
          "test"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the split to evaluate on"
      },
      {
        "name": "every",
        "type": "int",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1048576,
        "why": "so that epochs × steps fits a step counter",
        "doc": "epochs between evaluations (the last epoch is always evaluated)"
      },
      {
        "name": "batch",
        "type": "int",
        "default": "500",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 16777216,
        "why": "256 times the largest batch trained on ImageNet",
        "doc": "evaluation batch size"
      }
    ]
  },
  {
    "name": "fields",
    "kind": "stage",
    "doc": "the fields every sample carries (image, mask, boxes, classes, label, labels, tokens, tensor) and the source's key for each; right after the source",
    "params": [
      {
        "name": "image",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the image (every sample has one): its key, or the source's image"
      },
      {
        "name": "mask",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "a segmentation mask of class ids (PNG), moved with the image by nearest-neighbour: its key (WebDataset mask.png, a sibling folder masks)"
      },
      {
        "name": "boxes",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "object boxes moved with the image (clipped, dropped below min_area): their key (WebDataset json:boxes; TFRecord the OD API's bbox lists)"
      },
      {
        "name": "classes",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the boxes' classes, one int each: their key (json:classes, image/object/class/label)"
      },
      {
        "name": "label",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "one int label: its key (cls, image/class/label, a labels column)"
      },
      {
        "name": "labels",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "several int labels (multi-label), batched as a multi-hot float32 vector of num_labels: their key"
      },
      {
        "name": "tokens",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "an int sequence (caption tokens), batched as int32 padded with zeros to max_tokens, with lengths: its key"
      },
      {
        "name": "tensor",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "a raw tensor of tensor_dtype and tensor_shape (an .npy member): its key"
      },
      {
        "name": "mask_dtype",
        "type": "enum",
        "default": "uint8",
        "required": false,
        "positional": false,
        "enum": [
          "uint8",
          "uint16"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the mask's class ids: uint8, or uint16 past 255 classes"
      },
      {
        "name": "max_boxes",
        "type": "int",
        "default": "100",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 65536,
        "why": "a batch holds max_boxes for every sample",
        "doc": "boxes a batch holds per sample, padded; a sample with more is a corrupt record"
      },
      {
        "name": "box_format",
        "type": "enum",
        "default": "xyxy",
        "required": false,
        "positional": false,
        "enum": [
          "xyxy",
          "xywh",
          "cxcywh"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "how boxes are read and written: xyxy (torchvision), xywh (COCO) or cxcywh"
      },
      {
        "name": "normalized",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the source's boxes are fractions of the image's size (TFRecords of the OD API); batches hold pixels"
      },
      {
        "name": "min_area",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "after the last operation, drop boxes of smaller area in pixels (and any of zero width or height)"
      },
      {
        "name": "num_labels",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "the vector is batched for every sample",
        "doc": "length of the labels vector (needed with labels): every label is below it"
      },
      {
        "name": "max_tokens",
        "type": "int",
        "default": "77",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1048576,
        "why": "a batch holds max_tokens for every sample",
        "doc": "tokens a batch holds per sample, padded; a longer sequence is a corrupt record"
      },
      {
        "name": "tensor_dtype",
        "type": "enum",
        "default": "float32",
        "required": false,
        "positional": false,
        "enum": [
          "uint8",
          "uint16",
          "int32",
          "int64",
          "float32"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the tensor's element type"
      },
      {
        "name": "tensor_shape",
        "type": "string",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "the tensor's shape, comma-separated (needed with tensor)"
      }
    ]
  },
  {
    "name": "flip",
    "kind": "stage",
    "doc": "mirror the image with probability p",
    "params": [
      {
        "name": "direction",
        "type": "enum",
        "default": "horizontal",
        "required": false,
        "positional": true,
        "enum": [
          "horizontal",
          "vertical"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "horizontal (left-right) or vertical (top-bottom)"
      },
      {
        "name": "p",
        "type": "float",
        "default": "0.5",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability of flipping"
      }
    ]
  },
  {
    "name": "gaussian_blur",
    "kind": "stage",
    "doc": "a kernel×kernel Gaussian blur, sigma drawn per sample, reflect padding (torchvision GaussianBlur)",
    "params": [
      {
        "name": "kernel",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 255,
        "why": "far wider than any blur in use; the blur keeps its weights on the stack",
        "doc": "side of the kernel, odd"
      },
      {
        "name": "sigma",
        "type": "floats",
        "default": "0.1,2",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range min,max the standard deviation is drawn from uniformly, 0 < min ≤ max (one value: fixed)"
      }
    ]
  },
  {
    "name": "grayscale",
    "kind": "stage",
    "doc": "with probability p, each pixel's grey 0.2989R+0.587G+0.114B in all three channels (torchvision RandomGrayscale)",
    "params": [
      {
        "name": "p",
        "type": "float",
        "default": "0.1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability of turning the image grey"
      }
    ]
  },
  {
    "name": "mixup",
    "kind": "stage",
    "doc": "blend each sample of a batch with the previous one by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision MixUp)",
    "params": [
      {
        "name": "alpha",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "λ ~ Beta(alpha, alpha), alpha > 0 (torchvision's default 1; its reference recipes use 0.2 for mixup, 1 for cutmix)"
      },
      {
        "name": "p",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability that a batch is mixed (one that is not gets one-hot targets)"
      },
      {
        "name": "num_classes",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "labels are below source.MaxClasses",
        "doc": "length of the targets; 0: the source's classes"
      }
    ]
  },
  {
    "name": "normalize",
    "kind": "stage",
    "doc": "(v/255 - mean) / std per channel, applied as the tensor is written; needs a float dtype",
    "params": [
      {
        "name": "mean",
        "type": "floats",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "per-channel means on the [0,1] scale, comma-separated (one value: all channels)"
      },
      {
        "name": "std",
        "type": "floats",
        "default": null,
        "required": true,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "per-channel standard deviations on the [0,1] scale, all > 0"
      },
      {
        "name": "where",
        "type": "enum",
        "default": "host",
        "required": false,
        "positional": false,
        "enum": [
          "host",
          "device"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "device: ship uint8 (4× fewer bytes) and normalise on each device; needs prefetch"
      }
    ]
  },
  {
    "name": "pipeline",
    "kind": "stage",
    "doc": "how the pipeline runs; none of these change a rank's output",
    "params": [
      {
        "name": "workers",
        "type": "int",
        "default": "auto",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": true,
        "min": 0,
        "max": 4096,
        "why": "each worker holds scratch images and a slab; far past any machine's cores",
        "doc": "transform goroutines: auto (sized as the first epoch runs, within the cores and memory=), 0 (one per core) or a number"
      },
      {
        "name": "memory",
        "type": "int",
        "default": "auto",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": true,
        "min": 1,
        "max": 16777216,
        "why": "16 TiB, more than any machine",
        "doc": "MiB that workers=auto and depth=auto may hold in batches (host slabs and device buffers); auto: a quarter of the memory this process may use"
      },
      {
        "name": "on_error",
        "type": "enum",
        "default": "fail",
        "required": false,
        "positional": false,
        "enum": [
          "fail",
          "skip"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "a corrupt record stops the run (fail) or is skipped, counted and listed (skip)"
      },
      {
        "name": "seed",
        "type": "int",
        "default": null,
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "the pipeline's seed when there is no shuffle stage"
      },
      {
        "name": "rank",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "past the largest MPI jobs",
        "doc": "this process's rank in a data-parallel job, e.g. ${RANK:-0}"
      },
      {
        "name": "world",
        "type": "int",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1048576,
        "why": "past the largest MPI jobs",
        "doc": "the number of ranks, e.g. ${WORLD_SIZE:-1}; each reads an equal, disjoint share"
      },
      {
        "name": "elastic",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "ranks read slices of whole global batches of one order, so the stream and a resume do not depend on the number of ranks (a last, partial global batch sits out)"
      }
    ]
  },
  {
    "name": "prefetch",
    "kind": "stage",
    "doc": "cut each global batch into equal, contiguous per-device slices and copy them to the devices ahead of their consumers",
    "params": [
      {
        "name": "depth",
        "type": "int",
        "default": "auto",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": true,
        "min": 1,
        "max": 64,
        "why": "each queued batch holds a device buffer",
        "doc": "batches each device's queue holds ahead of its consumer; auto starts at 2 and deepens on bursty stalls, within the pipeline's memory="
      },
      {
        "name": "devices",
        "type": "string",
        "default": "cpu:1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "cpu:N (N simulated devices, any machine), all or cuda:0,1 (GPUs, cuda build)"
      }
    ]
  },
  {
    "name": "rand_augment",
    "kind": "stage",
    "doc": "n operations drawn from torchvision's 14 (shears, translations, rotation, colour, posterize, solarize, autocontrast, equalize) at magnitude bin m (torchvision RandAugment)",
    "params": [
      {
        "name": "n",
        "type": "int",
        "default": "2",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 16,
        "why": "",
        "doc": "operations applied in turn"
      },
      {
        "name": "m",
        "type": "int",
        "default": "9",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "magnitude bin, below num_bins"
      },
      {
        "name": "num_bins",
        "type": "int",
        "default": "31",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 2,
        "max": 1024,
        "why": "",
        "doc": "number of magnitude bins spanning each operation's range"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "nearest",
        "required": false,
        "positional": false,
        "enum": [
          "nearest",
          "bilinear"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "nearest or bilinear sampling (torch grid_sample), torchvision's default nearest"
      },
      {
        "name": "fill",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 255,
        "why": "",
        "doc": "pixel value of the area the image no longer covers"
      }
    ]
  },
  {
    "name": "random_crop",
    "kind": "stage",
    "doc": "crop size×size at a random place of the image padded by pad (torchvision RandomCrop)",
    "params": [
      {
        "name": "size",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "side of the square crop in pixels"
      },
      {
        "name": "pad",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "padding added on every side before cropping"
      },
      {
        "name": "fill",
        "type": "enum",
        "default": "zero",
        "required": false,
        "positional": false,
        "enum": [
          "zero",
          "reflect",
          "edge",
          "wrap"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)"
      }
    ]
  },
  {
    "name": "random_erasing",
    "kind": "stage",
    "doc": "with probability p overwrite a random rectangle of the image (torchvision RandomErasing, before normalize: value on the [0,1] scale)",
    "params": [
      {
        "name": "p",
        "type": "float",
        "default": "0.5",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability of erasing"
      },
      {
        "name": "scale",
        "type": "floats",
        "default": "0.02,0.33",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range of the rectangle's area as a fraction of the image's, 0 < min ≤ max ≤ 1"
      },
      {
        "name": "ratio",
        "type": "floats",
        "default": "0.3,3.3",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range of the rectangle's aspect ratio (height/width, as torchvision), drawn log-uniformly"
      },
      {
        "name": "value",
        "type": "string",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "fill: one level in [0,1] for every channel, three per-channel levels (the normalize mean erases to 0 after it), or random bytes"
      }
    ]
  },
  {
    "name": "random_resized_crop",
    "kind": "stage",
    "doc": "a random area and aspect-ratio crop resized to size×size (torchvision RandomResizedCrop, with its centre-crop fallback)",
    "params": [
      {
        "name": "size",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "side of the output"
      },
      {
        "name": "scale",
        "type": "floats",
        "default": "0.08,1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range of the crop's area as a fraction of the image's"
      },
      {
        "name": "ratio",
        "type": "floats",
        "default": "0.75,1.3333333333333333",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "range of the crop's aspect ratio (width/height), drawn log-uniformly"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "bilinear",
        "required": false,
        "positional": false,
        "enum": [
          "bilinear",
          "bicubic",
          "lanczos"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "resampling filter, antialiased when shrinking (as PIL)"
      }
    ]
  },
  {
    "name": "resize",
    "kind": "stage",
    "doc": "scale so the shorter side is shorter= pixels, keeping the aspect ratio (torchvision Resize(int))",
    "params": [
      {
        "name": "shorter",
        "type": "int",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "length of the shorter side after resizing"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "bilinear",
        "required": false,
        "positional": false,
        "enum": [
          "bilinear",
          "bicubic",
          "lanczos"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "resampling filter, antialiased when shrinking (as PIL)"
      }
    ]
  },
  {
    "name": "rotate",
    "kind": "stage",
    "doc": "with probability p rotate by an angle uniform in [-degrees, degrees] about the centre (torchvision RandomRotation)",
    "params": [
      {
        "name": "degrees",
        "type": "float",
        "default": null,
        "required": true,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 180,
        "why": "",
        "doc": "largest angle in degrees, counter-clockwise positive"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "nearest",
        "required": false,
        "positional": false,
        "enum": [
          "nearest",
          "bilinear"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "nearest or bilinear sampling (torch grid_sample), torchvision's default nearest"
      },
      {
        "name": "fill",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 255,
        "why": "",
        "doc": "pixel value of the area the image no longer covers"
      },
      {
        "name": "expand",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "true: the output is the rotated image's bounding box, so its size varies with the angle; false: the input's size"
      },
      {
        "name": "p",
        "type": "float",
        "default": "1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1,
        "why": "",
        "doc": "probability of rotating"
      }
    ]
  },
  {
    "name": "shift",
    "kind": "stage",
    "doc": "translate by a random whole number of pixels (Keras ImageDataGenerator width/height_shift_range)",
    "params": [
      {
        "name": "width",
        "type": "float",
        "default": "0.1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "largest horizontal shift: a fraction of the width if < 1, else pixels"
      },
      {
        "name": "height",
        "type": "float",
        "default": "0.1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 32768,
        "why": "the longest image side pipe decodes",
        "doc": "largest vertical shift: a fraction of the height if < 1, else pixels"
      },
      {
        "name": "fill",
        "type": "enum",
        "default": "zero",
        "required": false,
        "positional": false,
        "enum": [
          "zero",
          "reflect",
          "edge",
          "wrap"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)"
      }
    ]
  },
  {
    "name": "shuffle",
    "kind": "stage",
    "doc": "a new random order of the samples every epoch; seed also keys the augmentations",
    "params": [
      {
        "name": "seed",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": true,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "the pipeline's seed"
      },
      {
        "name": "buffer",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 4294967295,
        "why": "stored epoch orders hold positions in 32 bits",
        "doc": "0: a full permutation; N: shards (tfrecord, webdataset files) in random order, read in sequence through an N-sample shuffle buffer (tf.data, WebDataset)"
      }
    ]
  },
  {
    "name": "to_tensor",
    "kind": "stage",
    "doc": "the memory layout and element type of batches",
    "params": [
      {
        "name": "layout",
        "type": "enum",
        "default": "nchw",
        "required": false,
        "positional": false,
        "enum": [
          "nchw",
          "nhwc"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "nchw (channels first, cuDNN's preference) or nhwc"
      },
      {
        "name": "dtype",
        "type": "enum",
        "default": "float32",
        "required": false,
        "positional": false,
        "enum": [
          "float32",
          "float16",
          "uint8"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "element type; floats without normalize are scaled to [0,1]"
      }
    ]
  },
  {
    "name": "train",
    "kind": "stage",
    "doc": "train a model on the batches, one replica per device (data parallel); comes last, before eval",
    "params": [
      {
        "name": "model",
        "type": "enum",
        "default": null,
        "required": true,
        "positional": true,
        "enum": [
          "mlp",
          "keras_cnn",
          "resnet"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "mlp, keras_cnn (Keras' cifar10_cnn.py) or resnet (CIFAR ResNet, He et al.)"
      },
      {
        "name": "depth",
        "type": "int",
        "default": "20",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 8,
        "max": 1202,
        "why": "the deepest CIFAR ResNet of He et al.",
        "doc": "resnet depth, 6n+2: 8, 14, 20, 32, 44, 56, 110"
      },
      {
        "name": "width",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 65536,
        "why": "a model's size is checked against memory when it is built; this keeps the check's arithmetic exact",
        "doc": "resnet's first-stage channels (0: 16) or mlp's hidden units (0: 512)"
      },
      {
        "name": "epochs",
        "type": "int",
        "default": "10",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 1048576,
        "why": "so that epochs × steps fits a step counter",
        "doc": "epochs to train"
      },
      {
        "name": "steps_per_epoch",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 2147483648,
        "why": "a step counter's range",
        "doc": "cap on steps per epoch (0: the whole epoch), for quick runs"
      },
      {
        "name": "optimizer",
        "type": "enum",
        "default": "sgd",
        "required": false,
        "positional": false,
        "enum": [
          "sgd",
          "adam",
          "rmsprop"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "sgd, adam or rmsprop (PyTorch's update rules)"
      },
      {
        "name": "lr",
        "type": "float",
        "default": "0.1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "peak learning rate for base_batch, scaled to the global batch by scale_lr"
      },
      {
        "name": "base_batch",
        "type": "int",
        "default": "256",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 1,
        "max": 16777216,
        "why": "256 times the largest batch trained on ImageNet",
        "doc": "the batch size lr is given for"
      },
      {
        "name": "scale_lr",
        "type": "enum",
        "default": "linear",
        "required": false,
        "positional": false,
        "enum": [
          "linear",
          "sqrt",
          "none"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "how lr grows with the global batch (Goyal et al.: linear)"
      },
      {
        "name": "momentum",
        "type": "float",
        "default": "0.9",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 0.999,
        "why": "",
        "doc": "sgd and rmsprop momentum"
      },
      {
        "name": "nesterov",
        "type": "bool",
        "default": "false",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "Nesterov momentum (sgd)"
      },
      {
        "name": "weight_decay",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "L2 penalty on weights (not biases or batch-norm parameters)"
      },
      {
        "name": "schedule",
        "type": "enum",
        "default": "constant",
        "required": false,
        "positional": false,
        "enum": [
          "constant",
          "step",
          "cosine",
          "onecycle"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "learning-rate schedule after warm-up: constant, step, cosine or onecycle"
      },
      {
        "name": "warmup",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "epochs of linear warm-up (gradual warm-up for large batches)"
      },
      {
        "name": "step_every",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 1048576,
        "why": "so that epochs × steps fits a step counter",
        "doc": "schedule=step: epochs between decays"
      },
      {
        "name": "gamma",
        "type": "float",
        "default": "0.1",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": null,
        "why": "",
        "doc": "schedule=step: the decay factor"
      },
      {
        "name": "label_smoothing",
        "type": "float",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 0.999,
        "why": "",
        "doc": "ε of the smoothed one-hot target"
      },
      {
        "name": "mode",
        "type": "enum",
        "default": "sync",
        "required": false,
        "positional": false,
        "enum": [
          "sync",
          "local",
          "mixture"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "sync: average gradients every step; local: average parameters every average_every steps; mixture: once per epoch"
      },
      {
        "name": "average_every",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 2147483648,
        "why": "a step counter's range",
        "doc": "mode=local: steps between parameter averages"
      },
      {
        "name": "threads",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 4096,
        "why": "far past any machine's cores",
        "doc": "cores the replicas share (0: all)"
      },
      {
        "name": "out",
        "type": "string",
        "default": "runs/train",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "directory for checkpoint.gob, metrics.jsonl and the plots (resume with pipe run --resume)"
      },
      {
        "name": "log_every",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 2147483648,
        "why": "a step counter's range",
        "doc": "write every Nth step's loss, accuracy, lr and images/s to out/steps.jsonl (0: none)"
      }
    ]
  },
  {
    "name": "trivial_augment",
    "kind": "stage",
    "doc": "one operation drawn from torchvision's 14 at a random magnitude bin (torchvision TrivialAugmentWide)",
    "params": [
      {
        "name": "num_bins",
        "type": "int",
        "default": "31",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 2,
        "max": 1024,
        "why": "",
        "doc": "number of magnitude bins spanning each operation's range"
      },
      {
        "name": "interpolation",
        "type": "enum",
        "default": "nearest",
        "required": false,
        "positional": false,
        "enum": [
          "nearest",
          "bilinear"
        ],
        "auto": false,
        "min": null,
        "max": null,
        "why": "",
        "doc": "nearest or bilinear sampling (torch grid_sample), torchvision's default nearest"
      },
      {
        "name": "fill",
        "type": "int",
        "default": "0",
        "required": false,
        "positional": false,
        "enum": null,
        "auto": false,
        "min": 0,
        "max": 255,
        "why": "",
        "doc": "pixel value of the area the image no longer covers"
      }
    ]
  }
]
''')
"""pipe's registry, as ``pipe stages --json`` printed it."""


class Stages:
    """Pipeline's methods: one per stage of pipe's registry, and source."""

    @overload
    def source(self: _P, name: Literal["cifar10"], *, path: Optional[Union[str, os.PathLike]] = None, split: Optional[Literal["train", "test"]] = None, download: Optional[bool] = None, cache_dir: Optional[Union[str, os.PathLike]] = None, mirror: Optional[Union[str, os.PathLike]] = None, checksum: Optional[Union[str, os.PathLike]] = None) -> _P: ...

    @overload
    def source(self: _P, name: Literal["cifar100"], *, path: Optional[Union[str, os.PathLike]] = None, split: Optional[Literal["train", "test"]] = None, download: Optional[bool] = None, cache_dir: Optional[Union[str, os.PathLike]] = None, mirror: Optional[Union[str, os.PathLike]] = None, checksum: Optional[Union[str, os.PathLike]] = None, labels: Optional[Literal["fine", "coarse"]] = None) -> _P: ...

    @overload
    def source(self: _P, name: Literal["image_folder"], *, path: Optional[Union[str, os.PathLike]] = None, labels: Optional[Union[str, os.PathLike]] = None, classes: Optional[Union[str, os.PathLike]] = None, split: Optional[Literal["train", "test"]] = None, endpoint: Optional[Union[str, os.PathLike]] = None, region: Optional[Union[str, os.PathLike]] = None, path_style: Optional[bool] = None, cache_dir: Optional[Union[str, os.PathLike]] = None, cache_size: Optional[Union[str, os.PathLike]] = None, concurrency: Optional[int] = None, retry_for: Optional[Union[str, os.PathLike]] = None) -> _P: ...

    @overload
    def source(self: _P, name: Literal["synthetic"], *, n: Optional[int] = None, split: Optional[Literal["train", "test"]] = None, seed: Optional[int] = None, shuffle_labels: Optional[bool] = None) -> _P: ...

    @overload
    def source(self: _P, name: Literal["tfrecord"], *, path: Optional[Union[str, os.PathLike]] = None, image_key: Optional[Union[str, os.PathLike]] = None, label_key: Optional[Union[str, os.PathLike]] = None, label_offset: Optional[int] = None, index_dir: Optional[Union[str, os.PathLike]] = None, split: Optional[Literal["train", "test"]] = None, endpoint: Optional[Union[str, os.PathLike]] = None, region: Optional[Union[str, os.PathLike]] = None, path_style: Optional[bool] = None, cache_dir: Optional[Union[str, os.PathLike]] = None, cache_size: Optional[Union[str, os.PathLike]] = None, concurrency: Optional[int] = None, retry_for: Optional[Union[str, os.PathLike]] = None) -> _P: ...

    @overload
    def source(self: _P, name: Literal["webdataset"], *, path: Optional[Union[str, os.PathLike]] = None, label_field: Optional[Union[str, os.PathLike]] = None, index_dir: Optional[Union[str, os.PathLike]] = None, endpoint: Optional[Union[str, os.PathLike]] = None, region: Optional[Union[str, os.PathLike]] = None, path_style: Optional[bool] = None, cache_dir: Optional[Union[str, os.PathLike]] = None, cache_size: Optional[Union[str, os.PathLike]] = None, concurrency: Optional[int] = None, retry_for: Optional[Union[str, os.PathLike]] = None) -> _P: ...

    def source(self: _P, name: str, *args: Any, **params: Any) -> _P:
        """The data: source NAME and its parameters, the first line of a
        pipeline. The sources:

        cifar10: CIFAR-10 binary distribution: 32×32 RGB, 10 classes (50,000 train, 10,000 test)
            path: string
                the official .tar.gz, its extracted directory, or one batch file
            split: train|test = train
                which part of the dataset
            download: bool = false
                fetch and verify the official archive into cache_dir when no path is given
            cache_dir: string
                where downloads go (default $PIPE_CACHE or ~/.cache/pipe)
            mirror: string
                download from this URL instead of the official one (needs checksum)
            checksum: string
                the mirror's md5:<hex> or sha256:<hex>

        cifar100: CIFAR-100 binary distribution: 32×32 RGB, 100 fine or 20 coarse classes
            path: string
                the official .tar.gz, its extracted directory, or one batch file
            split: train|test = train
                which part of the dataset
            download: bool = false
                fetch and verify the official archive into cache_dir when no path is given
            cache_dir: string
                where downloads go (default $PIPE_CACHE or ~/.cache/pipe)
            mirror: string
                download from this URL instead of the official one (needs checksum)
            checksum: string
                the mirror's md5:<hex> or sha256:<hex>
            labels: fine|coarse = fine
                which label byte to use

        image_folder: JPEG/PNG files: one sub-directory per class (torchvision ImageFolder, ILSVRC train/), or a flat directory with labels= (ImageNet val); needs decode
            path: string (required)
                the directory, or a URL: s3://bucket/train/ (class folders found by listing), https://host/val/ (with labels=), each file fetched into the shard cache
            labels: string
                flat layout: a CSV of file,label lines (a header is skipped), a path or URL; without classes= the classes are 0..the largest label (past 1,024, half must appear)
            classes: string
                a CSV of label,name lines naming the classes (e.g. ILSVRC synsets), a path or URL
            split: train|test = train
                eval split=test reads path/../val (or path/../test) when it exists
            endpoint: string
                S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)
            region: string
                S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)
            path_style: bool = false
                address buckets as endpoint/bucket/key, as most S3-compatible servers want
            cache_dir: string
                the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)
            cache_size: string
                bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)
            concurrency: int = 8 in [1, ]
                shards fetched at once for URL paths, each one streaming 1 MiB buffer
            retry_for: string
                how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)

        synthetic: generated CIFAR-shaped data (3×32×32, 10 learnable classes); needs no files or network
            n: int = 50000 in [1, 4294967295]
                number of samples
                (at most 4294967295: stored epoch orders hold positions in 32 bits)
            split: train|test = train
                which part of the dataset
            seed: int = 0 in [0, ]
                generator seed (the data, not the augmentation)
            shuffle_labels: bool = false
                labels independent of images: a control that nothing can learn

        tfrecord: tf.train.Example records in TFRecord files (plain or GZIP, both CRC-32Cs checked, offsets indexed once); needs decode
            path: string (required)
                the files: a glob with braces (data/train-{00000..01023}-of-01024, data/train-*), or a URL (s3://bucket/train-*, https://host/train-{0..9}.tfrecord) fetched into the shard cache
            image_key: string = image/encoded
                the bytes feature holding the encoded image
            label_key: string = image/class/label
                the int64 feature holding the label
            label_offset: int = 0 in [0, 1048576]
                subtracted from labels (build_image_data numbers classes from 1: use 1)
                (at most 1048576: labels are below source.MaxClasses)
            index_dir: string
                where offset indexes and decompressed GZIP copies go (default $PIPE_CACHE/tfrecord)
            split: train|test = train
                eval split=test reads the path with train replaced by validation (or val, test)
            endpoint: string
                S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)
            region: string
                S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)
            path_style: bool = false
                address buckets as endpoint/bucket/key, as most S3-compatible servers want
            cache_dir: string
                the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)
            cache_size: string
                bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)
            concurrency: int = 8 in [1, ]
                shards fetched at once for URL paths, each one streaming 1 MiB buffer
            retry_for: string
                how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)

        webdataset: WebDataset tar shards (plain, .tar.gz, .tgz): members grouped by key, image from .jpg/.jpeg/.png, label from .cls or .json; needs decode
            path: string (required)
                the shards: a glob with braces (data/shard-{000000..001023}.tar, data/shard-*.tar), or a URL (s3://bucket/shard-*.tar, https://host/shard-{000..099}.tar) fetched into the shard cache
            label_field: string = label
                the .json field holding the label, for samples without a .cls member
            index_dir: string
                where gzipped shards are decompressed once (default $PIPE_CACHE/webdataset)
            endpoint: string
                S3 endpoint for s3:// paths, e.g. http://127.0.0.1:9000 or https://storage.googleapis.com (default $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, else AWS)
            region: string
                S3 region (default $AWS_REGION, $AWS_DEFAULT_REGION; us-east-1 for other endpoints than AWS)
            path_style: bool = false
                address buckets as endpoint/bucket/key, as most S3-compatible servers want
            cache_dir: string
                the shard cache for URL paths, shared by the processes of a machine (default $PIPE_SHARD_CACHE, else ~/.cache/pipe/shards)
            cache_size: string
                bound on the shard cache, e.g. 500G: least recently used shards are removed past it (default no bound)
            concurrency: int = 8 in [1, ]
                shards fetched at once for URL paths, each one streaming 1 MiB buffer
            retry_for: string
                how long a URL request that fails with an error that may pass (5xx, throttling, no answer, a dropped connection) is retried, e.g. 5m (default $PIPE_RETRY_FOR, else 60s)

        """
        return self._source(name, args, params)

    def affine(self: _P, degrees: Optional[float] = None, *, translate: Optional[Union[float, Sequence[float]]] = None, scale: Optional[Union[float, Sequence[float]]] = None, shear: Optional[Union[float, Sequence[float]]] = None, interpolation: Optional[Literal["nearest", "bilinear"]] = None, fill: Optional[int] = None, **unknown: Any) -> _P:
        """a random rotation, translation, scale and shear about the centre (torchvision RandomAffine)

        The .pipe stage affine; an argument left None is not written.

        Args:
            degrees: float (required) in [0, 180] [positional]
                the angle is uniform in [-degrees, degrees], clockwise positive (as torchvision's affine)
            translate: floats = 0,0
                largest shifts tx,ty as fractions of the width and height, each in [0, 1]; the shift is a whole number of pixels
            scale: floats = 1,1
                range min,max the scale is drawn from uniformly, 0 < min ≤ max ≤ 100
            shear: floats = 0
                shear angles in degrees: s (x in [-s, s]), x_min,x_max, or x_min,x_max,y_min,y_max; each in (-90, 90)
            interpolation: nearest|bilinear = nearest
                nearest or bilinear sampling (torch grid_sample), torchvision's default nearest
            fill: int = 0 in [0, 255]
                pixel value of the area the image no longer covers
        """
        return self._stage('affine', {'degrees': degrees, 'translate': translate, 'scale': scale, 'shear': shear, 'interpolation': interpolation, 'fill': fill, **unknown})

    def batch(self: _P, size: Optional[int] = None, *, drop_last: Optional[bool] = None, **unknown: Any) -> _P:
        """group samples into batches written straight into reusable slabs

        The .pipe stage batch; an argument left None is not written.

        Args:
            size: int (required) in [1, 16777216] [positional]
                samples per batch
                (at most 16777216: 256 times the largest batch trained on ImageNet)
            drop_last: bool = false
                leave out the final short batch of each epoch
        """
        return self._stage('batch', {'size': size, 'drop_last': drop_last, **unknown})

    def cache(self: _P, *, dir: Optional[Union[str, os.PathLike]] = None, epochs: Optional[int] = None, shard: Optional[int] = None, ahead: Optional[int] = None, memory: Optional[int] = None, **unknown: Any) -> _P:
        """store the output of every stage before it in a Badger directory and read it back instead of recomputing it

        The .pipe stage cache; an argument left None is not written.

        Args:
            dir: string (required)
                cache directory (created if missing; one pipe process at a time)
            epochs: int = 1 in [1, 1048576]
                distinct epochs cached after random stages; epoch e ≥ epochs reuses e mod epochs (data echoing)
                (at most 1048576: so that epochs × steps fits a step counter)
            shard: int = 0 in [0, 65536]
                samples per cache entry (0: about 1 MiB of images after random stages, 256 KiB otherwise, at most 256)
                (at most 65536: an entry is decompressed whole)
            ahead: int = 0 in [0, 1048576]
                epochs pipe run warms in the background ahead of the one being read
                (at most 1048576: so that epochs × steps fits a step counter)
            memory: int = 128 in [1, 16777216]
                MiB of decoded entries kept in memory
                (at most 16777216: 16 TiB, more than any machine)
        """
        return self._stage('cache', {'dir': dir, 'epochs': epochs, 'shard': shard, 'ahead': ahead, 'memory': memory, **unknown})

    def center_crop(self: _P, size: Optional[int] = None, **unknown: Any) -> _P:
        """the central size×size window, zero-padded if the image is smaller (torchvision CenterCrop)

        The .pipe stage center_crop; an argument left None is not written.

        Args:
            size: int (required) in [1, 32768] [positional]
                side of the square crop
                (at most 32768: the longest image side pipe decodes)
        """
        return self._stage('center_crop', {'size': size, **unknown})

    def color_jitter(self: _P, *, brightness: Optional[float] = None, contrast: Optional[float] = None, saturation: Optional[float] = None, hue: Optional[float] = None, **unknown: Any) -> _P:
        """random brightness, contrast, saturation and hue in a random order (torchvision ColorJitter)

        The .pipe stage color_jitter; an argument left None is not written.

        Args:
            brightness: float = 0 in [0, ]
                factor drawn from [max(0, 1-v), 1+v]
            contrast: float = 0 in [0, ]
                factor drawn from [max(0, 1-v), 1+v], around the mean grey
            saturation: float = 0 in [0, ]
                factor drawn from [max(0, 1-v), 1+v], around each pixel's grey
            hue: float = 0 in [0, 0.5]
                shift of each pixel's hue drawn from [-v, v] of the colour wheel (torchvision's adjust_hue)
        """
        return self._stage('color_jitter', {'brightness': brightness, 'contrast': contrast, 'saturation': saturation, 'hue': hue, **unknown})

    def cutmix(self: _P, *, alpha: Optional[float] = None, p: Optional[float] = None, num_classes: Optional[int] = None, **unknown: Any) -> _P:
        """paste a box of the previous sample of a batch into each sample, sized by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision CutMix)

        The .pipe stage cutmix; an argument left None is not written.

        Args:
            alpha: float = 1 in [0, ]
                λ ~ Beta(alpha, alpha), alpha > 0 (torchvision's default 1; its reference recipes use 0.2 for mixup, 1 for cutmix)
            p: float = 1 in [0, 1]
                probability that a batch is mixed (one that is not gets one-hot targets)
            num_classes: int = 0 in [0, 1048576]
                length of the targets; 0: the source's classes
                (at most 1048576: labels are below source.MaxClasses)
        """
        return self._stage('cutmix', {'alpha': alpha, 'p': p, 'num_classes': num_classes, **unknown})

    def decode(self: _P, *, reduce: Optional[bool] = None, max_pixels: Optional[int] = None, **unknown: Any) -> _P:
        """JPEG/PNG bytes to RGB pixels (greyscale and CMYK become RGB); right after an image source, before a cache that should skip decoding

        The .pipe stage decode; an argument left None is not written.

        Args:
            reduce: bool = true
                decode only the window a following resize/random_resized_crop reads at the smallest DCT scale (1/8, 1/4, 1/2) that keeps it at least its output size; false: at full scale
            max_pixels: int = 67108864 in [1, 1073741824]
                largest image decoded, width × height (the default, 2^26, is an 8192×8192 square, above a 61-MP photograph); checked from the header before anything is allocated: a larger image is a corrupt record, which on_error=skip skips
                (at most 1073741824: the square of the longest side pipe decodes)
        """
        return self._stage('decode', {'reduce': reduce, 'max_pixels': max_pixels, **unknown})

    def eval(self: _P, *, split: Optional[Literal["train", "test"]] = None, every: Optional[int] = None, batch: Optional[int] = None, **unknown: Any) -> _P:
        """evaluate the trained model on another split of the source (top-1 accuracy and loss), without augmentation

        The .pipe stage eval; an argument left None is not written.

        Args:
            split: train|test = test
                the split to evaluate on
            every: int = 1 in [1, 1048576]
                epochs between evaluations (the last epoch is always evaluated)
                (at most 1048576: so that epochs × steps fits a step counter)
            batch: int = 500 in [1, 16777216]
                evaluation batch size
                (at most 16777216: 256 times the largest batch trained on ImageNet)
        """
        return self._stage('eval', {'split': split, 'every': every, 'batch': batch, **unknown})

    def fields(self: _P, *, image: Optional[Union[str, os.PathLike]] = None, mask: Optional[Union[str, os.PathLike]] = None, boxes: Optional[Union[str, os.PathLike]] = None, classes: Optional[Union[str, os.PathLike]] = None, label: Optional[Union[str, os.PathLike]] = None, labels: Optional[Union[str, os.PathLike]] = None, tokens: Optional[Union[str, os.PathLike]] = None, tensor: Optional[Union[str, os.PathLike]] = None, mask_dtype: Optional[Literal["uint8", "uint16"]] = None, max_boxes: Optional[int] = None, box_format: Optional[Literal["xyxy", "xywh", "cxcywh"]] = None, normalized: Optional[bool] = None, min_area: Optional[float] = None, num_labels: Optional[int] = None, max_tokens: Optional[int] = None, tensor_dtype: Optional[Literal["uint8", "uint16", "int32", "int64", "float32"]] = None, tensor_shape: Optional[Union[str, os.PathLike]] = None, **unknown: Any) -> _P:
        """the fields every sample carries (image, mask, boxes, classes, label, labels, tokens, tensor) and the source's key for each; right after the source

        The .pipe stage fields; an argument left None is not written.

        Args:
            image: string
                the image (every sample has one): its key, or the source's image
            mask: string
                a segmentation mask of class ids (PNG), moved with the image by nearest-neighbour: its key (WebDataset mask.png, a sibling folder masks)
            boxes: string
                object boxes moved with the image (clipped, dropped below min_area): their key (WebDataset json:boxes; TFRecord the OD API's bbox lists)
            classes: string
                the boxes' classes, one int each: their key (json:classes, image/object/class/label)
            label: string
                one int label: its key (cls, image/class/label, a labels column)
            labels: string
                several int labels (multi-label), batched as a multi-hot float32 vector of num_labels: their key
            tokens: string
                an int sequence (caption tokens), batched as int32 padded with zeros to max_tokens, with lengths: its key
            tensor: string
                a raw tensor of tensor_dtype and tensor_shape (an .npy member): its key
            mask_dtype: uint8|uint16 = uint8
                the mask's class ids: uint8, or uint16 past 255 classes
            max_boxes: int = 100 in [1, 65536]
                boxes a batch holds per sample, padded; a sample with more is a corrupt record
                (at most 65536: a batch holds max_boxes for every sample)
            box_format: xyxy|xywh|cxcywh = xyxy
                how boxes are read and written: xyxy (torchvision), xywh (COCO) or cxcywh
            normalized: bool = false
                the source's boxes are fractions of the image's size (TFRecords of the OD API); batches hold pixels
            min_area: float = 1 in [0, ]
                after the last operation, drop boxes of smaller area in pixels (and any of zero width or height)
            num_labels: int = 0 in [0, 1048576]
                length of the labels vector (needed with labels): every label is below it
                (at most 1048576: the vector is batched for every sample)
            max_tokens: int = 77 in [1, 1048576]
                tokens a batch holds per sample, padded; a longer sequence is a corrupt record
                (at most 1048576: a batch holds max_tokens for every sample)
            tensor_dtype: uint8|uint16|int32|int64|float32 = float32
                the tensor's element type
            tensor_shape: string
                the tensor's shape, comma-separated (needed with tensor)
        """
        return self._stage('fields', {'image': image, 'mask': mask, 'boxes': boxes, 'classes': classes, 'label': label, 'labels': labels, 'tokens': tokens, 'tensor': tensor, 'mask_dtype': mask_dtype, 'max_boxes': max_boxes, 'box_format': box_format, 'normalized': normalized, 'min_area': min_area, 'num_labels': num_labels, 'max_tokens': max_tokens, 'tensor_dtype': tensor_dtype, 'tensor_shape': tensor_shape, **unknown})

    def flip(self: _P, direction: Optional[Literal["horizontal", "vertical"]] = None, *, p: Optional[float] = None, **unknown: Any) -> _P:
        """mirror the image with probability p

        The .pipe stage flip; an argument left None is not written.

        Args:
            direction: horizontal|vertical = horizontal [positional]
                horizontal (left-right) or vertical (top-bottom)
            p: float = 0.5 in [0, 1]
                probability of flipping
        """
        return self._stage('flip', {'direction': direction, 'p': p, **unknown})

    def gaussian_blur(self: _P, kernel: Optional[int] = None, *, sigma: Optional[Union[float, Sequence[float]]] = None, **unknown: Any) -> _P:
        """a kernel×kernel Gaussian blur, sigma drawn per sample, reflect padding (torchvision GaussianBlur)

        The .pipe stage gaussian_blur; an argument left None is not written.

        Args:
            kernel: int (required) in [1, 255] [positional]
                side of the kernel, odd
                (at most 255: far wider than any blur in use; the blur keeps its weights on the stack)
            sigma: floats = 0.1,2
                range min,max the standard deviation is drawn from uniformly, 0 < min ≤ max (one value: fixed)
        """
        return self._stage('gaussian_blur', {'kernel': kernel, 'sigma': sigma, **unknown})

    def grayscale(self: _P, *, p: Optional[float] = None, **unknown: Any) -> _P:
        """with probability p, each pixel's grey 0.2989R+0.587G+0.114B in all three channels (torchvision RandomGrayscale)

        The .pipe stage grayscale; an argument left None is not written.

        Args:
            p: float = 0.1 in [0, 1]
                probability of turning the image grey
        """
        return self._stage('grayscale', {'p': p, **unknown})

    def mixup(self: _P, *, alpha: Optional[float] = None, p: Optional[float] = None, num_classes: Optional[int] = None, **unknown: Any) -> _P:
        """blend each sample of a batch with the previous one by λ ~ Beta(alpha, alpha), and give batches soft targets (torchvision MixUp)

        The .pipe stage mixup; an argument left None is not written.

        Args:
            alpha: float = 1 in [0, ]
                λ ~ Beta(alpha, alpha), alpha > 0 (torchvision's default 1; its reference recipes use 0.2 for mixup, 1 for cutmix)
            p: float = 1 in [0, 1]
                probability that a batch is mixed (one that is not gets one-hot targets)
            num_classes: int = 0 in [0, 1048576]
                length of the targets; 0: the source's classes
                (at most 1048576: labels are below source.MaxClasses)
        """
        return self._stage('mixup', {'alpha': alpha, 'p': p, 'num_classes': num_classes, **unknown})

    def normalize(self: _P, *, mean: Optional[Union[float, Sequence[float]]] = None, std: Optional[Union[float, Sequence[float]]] = None, where: Optional[Literal["host", "device"]] = None, **unknown: Any) -> _P:
        """(v/255 - mean) / std per channel, applied as the tensor is written; needs a float dtype

        The .pipe stage normalize; an argument left None is not written.

        Args:
            mean: floats (required)
                per-channel means on the [0,1] scale, comma-separated (one value: all channels)
            std: floats (required)
                per-channel standard deviations on the [0,1] scale, all > 0
            where: host|device = host
                device: ship uint8 (4× fewer bytes) and normalise on each device; needs prefetch
        """
        return self._stage('normalize', {'mean': mean, 'std': std, 'where': where, **unknown})

    def pipeline(self: _P, *, workers: Optional[Union[int, Literal["auto"]]] = None, memory: Optional[Union[int, Literal["auto"]]] = None, on_error: Optional[Literal["fail", "skip"]] = None, seed: Optional[int] = None, rank: Optional[int] = None, world: Optional[int] = None, elastic: Optional[bool] = None, **unknown: Any) -> _P:
        """how the pipeline runs; none of these change a rank's output

        The .pipe stage pipeline; an argument left None is not written.

        Args:
            workers: int|auto = auto in [0, 4096]
                transform goroutines: auto (sized as the first epoch runs, within the cores and memory=), 0 (one per core) or a number
                (at most 4096: each worker holds scratch images and a slab; far past any machine's cores)
            memory: int|auto = auto in [1, 16777216]
                MiB that workers=auto and depth=auto may hold in batches (host slabs and device buffers); auto: a quarter of the memory this process may use
                (at most 16777216: 16 TiB, more than any machine)
            on_error: fail|skip = fail
                a corrupt record stops the run (fail) or is skipped, counted and listed (skip)
            seed: int in [0, ]
                the pipeline's seed when there is no shuffle stage
            rank: int = 0 in [0, 1048576]
                this process's rank in a data-parallel job, e.g. ${RANK:-0}
                (at most 1048576: past the largest MPI jobs)
            world: int = 1 in [1, 1048576]
                the number of ranks, e.g. ${WORLD_SIZE:-1}; each reads an equal, disjoint share
                (at most 1048576: past the largest MPI jobs)
            elastic: bool = false
                ranks read slices of whole global batches of one order, so the stream and a resume do not depend on the number of ranks (a last, partial global batch sits out)
        """
        return self._stage('pipeline', {'workers': workers, 'memory': memory, 'on_error': on_error, 'seed': seed, 'rank': rank, 'world': world, 'elastic': elastic, **unknown})

    def prefetch(self: _P, *, depth: Optional[Union[int, Literal["auto"]]] = None, devices: Optional[Union[str, os.PathLike]] = None, **unknown: Any) -> _P:
        """cut each global batch into equal, contiguous per-device slices and copy them to the devices ahead of their consumers

        The .pipe stage prefetch; an argument left None is not written.

        Args:
            depth: int|auto = auto in [1, 64]
                batches each device's queue holds ahead of its consumer; auto starts at 2 and deepens on bursty stalls, within the pipeline's memory=
                (at most 64: each queued batch holds a device buffer)
            devices: string = cpu:1
                cpu:N (N simulated devices, any machine), all or cuda:0,1 (GPUs, cuda build)
        """
        return self._stage('prefetch', {'depth': depth, 'devices': devices, **unknown})

    def rand_augment(self: _P, *, n: Optional[int] = None, m: Optional[int] = None, num_bins: Optional[int] = None, interpolation: Optional[Literal["nearest", "bilinear"]] = None, fill: Optional[int] = None, **unknown: Any) -> _P:
        """n operations drawn from torchvision's 14 (shears, translations, rotation, colour, posterize, solarize, autocontrast, equalize) at magnitude bin m (torchvision RandAugment)

        The .pipe stage rand_augment; an argument left None is not written.

        Args:
            n: int = 2 in [1, 16]
                operations applied in turn
            m: int = 9 in [0, ]
                magnitude bin, below num_bins
            num_bins: int = 31 in [2, 1024]
                number of magnitude bins spanning each operation's range
            interpolation: nearest|bilinear = nearest
                nearest or bilinear sampling (torch grid_sample), torchvision's default nearest
            fill: int = 0 in [0, 255]
                pixel value of the area the image no longer covers
        """
        return self._stage('rand_augment', {'n': n, 'm': m, 'num_bins': num_bins, 'interpolation': interpolation, 'fill': fill, **unknown})

    def random_crop(self: _P, size: Optional[int] = None, *, pad: Optional[int] = None, fill: Optional[Literal["zero", "reflect", "edge", "wrap"]] = None, **unknown: Any) -> _P:
        """crop size×size at a random place of the image padded by pad (torchvision RandomCrop)

        The .pipe stage random_crop; an argument left None is not written.

        Args:
            size: int (required) in [1, 32768] [positional]
                side of the square crop in pixels
                (at most 32768: the longest image side pipe decodes)
            pad: int = 0 in [0, 32768]
                padding added on every side before cropping
                (at most 32768: the longest image side pipe decodes)
            fill: zero|reflect|edge|wrap = zero
                pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)
        """
        return self._stage('random_crop', {'size': size, 'pad': pad, 'fill': fill, **unknown})

    def random_erasing(self: _P, *, p: Optional[float] = None, scale: Optional[Union[float, Sequence[float]]] = None, ratio: Optional[Union[float, Sequence[float]]] = None, value: Optional[Union[str, os.PathLike]] = None, **unknown: Any) -> _P:
        """with probability p overwrite a random rectangle of the image (torchvision RandomErasing, before normalize: value on the [0,1] scale)

        The .pipe stage random_erasing; an argument left None is not written.

        Args:
            p: float = 0.5 in [0, 1]
                probability of erasing
            scale: floats = 0.02,0.33
                range of the rectangle's area as a fraction of the image's, 0 < min ≤ max ≤ 1
            ratio: floats = 0.3,3.3
                range of the rectangle's aspect ratio (height/width, as torchvision), drawn log-uniformly
            value: string = 0
                fill: one level in [0,1] for every channel, three per-channel levels (the normalize mean erases to 0 after it), or random bytes
        """
        return self._stage('random_erasing', {'p': p, 'scale': scale, 'ratio': ratio, 'value': value, **unknown})

    def random_resized_crop(self: _P, size: Optional[int] = None, *, scale: Optional[Union[float, Sequence[float]]] = None, ratio: Optional[Union[float, Sequence[float]]] = None, interpolation: Optional[Literal["bilinear", "bicubic", "lanczos"]] = None, **unknown: Any) -> _P:
        """a random area and aspect-ratio crop resized to size×size (torchvision RandomResizedCrop, with its centre-crop fallback)

        The .pipe stage random_resized_crop; an argument left None is not written.

        Args:
            size: int (required) in [1, 32768] [positional]
                side of the output
                (at most 32768: the longest image side pipe decodes)
            scale: floats = 0.08,1
                range of the crop's area as a fraction of the image's
            ratio: floats = 0.75,1.3333333333333333
                range of the crop's aspect ratio (width/height), drawn log-uniformly
            interpolation: bilinear|bicubic|lanczos = bilinear
                resampling filter, antialiased when shrinking (as PIL)
        """
        return self._stage('random_resized_crop', {'size': size, 'scale': scale, 'ratio': ratio, 'interpolation': interpolation, **unknown})

    def resize(self: _P, shorter: Optional[int] = None, *, interpolation: Optional[Literal["bilinear", "bicubic", "lanczos"]] = None, **unknown: Any) -> _P:
        """scale so the shorter side is shorter= pixels, keeping the aspect ratio (torchvision Resize(int))

        The .pipe stage resize; an argument left None is not written.

        Args:
            shorter: int (required) in [1, 32768] [positional]
                length of the shorter side after resizing
                (at most 32768: the longest image side pipe decodes)
            interpolation: bilinear|bicubic|lanczos = bilinear
                resampling filter, antialiased when shrinking (as PIL)
        """
        return self._stage('resize', {'shorter': shorter, 'interpolation': interpolation, **unknown})

    def rotate(self: _P, degrees: Optional[float] = None, *, interpolation: Optional[Literal["nearest", "bilinear"]] = None, fill: Optional[int] = None, expand: Optional[bool] = None, p: Optional[float] = None, **unknown: Any) -> _P:
        """with probability p rotate by an angle uniform in [-degrees, degrees] about the centre (torchvision RandomRotation)

        The .pipe stage rotate; an argument left None is not written.

        Args:
            degrees: float (required) in [0, 180] [positional]
                largest angle in degrees, counter-clockwise positive
            interpolation: nearest|bilinear = nearest
                nearest or bilinear sampling (torch grid_sample), torchvision's default nearest
            fill: int = 0 in [0, 255]
                pixel value of the area the image no longer covers
            expand: bool = false
                true: the output is the rotated image's bounding box, so its size varies with the angle; false: the input's size
            p: float = 1 in [0, 1]
                probability of rotating
        """
        return self._stage('rotate', {'degrees': degrees, 'interpolation': interpolation, 'fill': fill, 'expand': expand, 'p': p, **unknown})

    def shift(self: _P, *, width: Optional[float] = None, height: Optional[float] = None, fill: Optional[Literal["zero", "reflect", "edge", "wrap"]] = None, **unknown: Any) -> _P:
        """translate by a random whole number of pixels (Keras ImageDataGenerator width/height_shift_range)

        The .pipe stage shift; an argument left None is not written.

        Args:
            width: float = 0.1 in [0, 32768]
                largest horizontal shift: a fraction of the width if < 1, else pixels
                (at most 32768: the longest image side pipe decodes)
            height: float = 0.1 in [0, 32768]
                largest vertical shift: a fraction of the height if < 1, else pixels
                (at most 32768: the longest image side pipe decodes)
            fill: zero|reflect|edge|wrap = zero
                pixels outside the image: zero, reflect (dcb|abcd), edge (aaa|abcd) or wrap (bcd|abcd)
        """
        return self._stage('shift', {'width': width, 'height': height, 'fill': fill, **unknown})

    def shuffle(self: _P, seed: Optional[int] = None, *, buffer: Optional[int] = None, **unknown: Any) -> _P:
        """a new random order of the samples every epoch; seed also keys the augmentations

        The .pipe stage shuffle; an argument left None is not written.

        Args:
            seed: int = 0 in [0, ] [positional]
                the pipeline's seed
            buffer: int = 0 in [0, 4294967295]
                0: a full permutation; N: shards (tfrecord, webdataset files) in random order, read in sequence through an N-sample shuffle buffer (tf.data, WebDataset)
                (at most 4294967295: stored epoch orders hold positions in 32 bits)
        """
        return self._stage('shuffle', {'seed': seed, 'buffer': buffer, **unknown})

    def to_tensor(self: _P, *, layout: Optional[Literal["nchw", "nhwc"]] = None, dtype: Optional[Literal["float32", "float16", "uint8"]] = None, **unknown: Any) -> _P:
        """the memory layout and element type of batches

        The .pipe stage to_tensor; an argument left None is not written.

        Args:
            layout: nchw|nhwc = nchw
                nchw (channels first, cuDNN's preference) or nhwc
            dtype: float32|float16|uint8 = float32
                element type; floats without normalize are scaled to [0,1]
        """
        return self._stage('to_tensor', {'layout': layout, 'dtype': dtype, **unknown})

    def train(self: _P, model: Optional[Literal["mlp", "keras_cnn", "resnet"]] = None, *, depth: Optional[int] = None, width: Optional[int] = None, epochs: Optional[int] = None, steps_per_epoch: Optional[int] = None, optimizer: Optional[Literal["sgd", "adam", "rmsprop"]] = None, lr: Optional[float] = None, base_batch: Optional[int] = None, scale_lr: Optional[Literal["linear", "sqrt", "none"]] = None, momentum: Optional[float] = None, nesterov: Optional[bool] = None, weight_decay: Optional[float] = None, schedule: Optional[Literal["constant", "step", "cosine", "onecycle"]] = None, warmup: Optional[float] = None, step_every: Optional[int] = None, gamma: Optional[float] = None, label_smoothing: Optional[float] = None, mode: Optional[Literal["sync", "local", "mixture"]] = None, average_every: Optional[int] = None, threads: Optional[int] = None, out: Optional[Union[str, os.PathLike]] = None, log_every: Optional[int] = None, **unknown: Any) -> _P:
        """train a model on the batches, one replica per device (data parallel); comes last, before eval

        The .pipe stage train; an argument left None is not written.

        Args:
            model: mlp|keras_cnn|resnet (required) [positional]
                mlp, keras_cnn (Keras' cifar10_cnn.py) or resnet (CIFAR ResNet, He et al.)
            depth: int = 20 in [8, 1202]
                resnet depth, 6n+2: 8, 14, 20, 32, 44, 56, 110
                (at most 1202: the deepest CIFAR ResNet of He et al.)
            width: int = 0 in [0, 65536]
                resnet's first-stage channels (0: 16) or mlp's hidden units (0: 512)
                (at most 65536: a model's size is checked against memory when it is built; this keeps the check's arithmetic exact)
            epochs: int = 10 in [1, 1048576]
                epochs to train
                (at most 1048576: so that epochs × steps fits a step counter)
            steps_per_epoch: int = 0 in [0, 2147483648]
                cap on steps per epoch (0: the whole epoch), for quick runs
                (at most 2147483648: a step counter's range)
            optimizer: sgd|adam|rmsprop = sgd
                sgd, adam or rmsprop (PyTorch's update rules)
            lr: float = 0.1 in [0, ]
                peak learning rate for base_batch, scaled to the global batch by scale_lr
            base_batch: int = 256 in [1, 16777216]
                the batch size lr is given for
                (at most 16777216: 256 times the largest batch trained on ImageNet)
            scale_lr: linear|sqrt|none = linear
                how lr grows with the global batch (Goyal et al.: linear)
            momentum: float = 0.9 in [0, 0.999]
                sgd and rmsprop momentum
            nesterov: bool = false
                Nesterov momentum (sgd)
            weight_decay: float = 0 in [0, ]
                L2 penalty on weights (not biases or batch-norm parameters)
            schedule: constant|step|cosine|onecycle = constant
                learning-rate schedule after warm-up: constant, step, cosine or onecycle
            warmup: float = 0 in [0, ]
                epochs of linear warm-up (gradual warm-up for large batches)
            step_every: int = 0 in [0, 1048576]
                schedule=step: epochs between decays
                (at most 1048576: so that epochs × steps fits a step counter)
            gamma: float = 0.1 in [0, ]
                schedule=step: the decay factor
            label_smoothing: float = 0 in [0, 0.999]
                ε of the smoothed one-hot target
            mode: sync|local|mixture = sync
                sync: average gradients every step; local: average parameters every average_every steps; mixture: once per epoch
            average_every: int = 0 in [0, 2147483648]
                mode=local: steps between parameter averages
                (at most 2147483648: a step counter's range)
            threads: int = 0 in [0, 4096]
                cores the replicas share (0: all)
                (at most 4096: far past any machine's cores)
            out: string = runs/train
                directory for checkpoint.gob, metrics.jsonl and the plots (resume with pipe run --resume)
            log_every: int = 0 in [0, 2147483648]
                write every Nth step's loss, accuracy, lr and images/s to out/steps.jsonl (0: none)
                (at most 2147483648: a step counter's range)
        """
        return self._stage('train', {'model': model, 'depth': depth, 'width': width, 'epochs': epochs, 'steps_per_epoch': steps_per_epoch, 'optimizer': optimizer, 'lr': lr, 'base_batch': base_batch, 'scale_lr': scale_lr, 'momentum': momentum, 'nesterov': nesterov, 'weight_decay': weight_decay, 'schedule': schedule, 'warmup': warmup, 'step_every': step_every, 'gamma': gamma, 'label_smoothing': label_smoothing, 'mode': mode, 'average_every': average_every, 'threads': threads, 'out': out, 'log_every': log_every, **unknown})

    def trivial_augment(self: _P, *, num_bins: Optional[int] = None, interpolation: Optional[Literal["nearest", "bilinear"]] = None, fill: Optional[int] = None, **unknown: Any) -> _P:
        """one operation drawn from torchvision's 14 at a random magnitude bin (torchvision TrivialAugmentWide)

        The .pipe stage trivial_augment; an argument left None is not written.

        Args:
            num_bins: int = 31 in [2, 1024]
                number of magnitude bins spanning each operation's range
            interpolation: nearest|bilinear = nearest
                nearest or bilinear sampling (torch grid_sample), torchvision's default nearest
            fill: int = 0 in [0, 255]
                pixel value of the area the image no longer covers
        """
        return self._stage('trivial_augment', {'num_bins': num_bins, 'interpolation': interpolation, 'fill': fill, **unknown})
