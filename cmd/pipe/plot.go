package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/pipefeed/pipe"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// plotHistory draws a run's curves into dir: accuracy.png and loss.png,
// each with two panels side by side — against epoch and against wall-clock
// time — and train and test lines. It returns the files written.
func plotHistory(dir string, h []pipe.TrainEpoch) ([]string, error) {
	if len(h) == 0 {
		return nil, nil
	}
	type series struct {
		name string
		get  func(pipe.TrainEpoch) (float64, bool)
	}
	charts := []struct {
		file, y string
		lines   []series
	}{
		{"accuracy.png", "top-1 accuracy", []series{
			{"train", func(e pipe.TrainEpoch) (float64, bool) { return e.TrainAccuracy, true }},
			{"test", func(e pipe.TrainEpoch) (float64, bool) {
				if e.TestAccuracy == nil {
					return 0, false
				}
				return *e.TestAccuracy, true
			}},
		}},
		{"loss.png", "loss", []series{
			{"train", func(e pipe.TrainEpoch) (float64, bool) { return e.TrainLoss, true }},
			{"test", func(e pipe.TrainEpoch) (float64, bool) {
				if e.TestLoss == nil {
					return 0, false
				}
				return *e.TestLoss, true
			}},
		}},
	}
	var files []string
	for _, c := range charts {
		var panels [][]*plot.Plot
		row := []*plot.Plot{}
		for _, x := range []struct {
			label string
			get   func(pipe.TrainEpoch) float64
		}{
			{"epoch", func(e pipe.TrainEpoch) float64 { return float64(e.Epoch) }}, // numbered from 0, as the log numbers them
			{"wall-clock time (s)", func(e pipe.TrainEpoch) float64 { return e.WallSeconds }},
		} {
			p := plot.New()
			p.Title.Text = c.y + " against " + x.label
			p.X.Label.Text, p.Y.Label.Text = x.label, c.y
			p.Add(plotter.NewGrid())
			for i, s := range c.lines {
				var pts plotter.XYs
				for _, e := range h {
					if v, ok := s.get(e); ok {
						pts = append(pts, plotter.XY{X: x.get(e), Y: v})
					}
				}
				if len(pts) == 0 {
					continue
				}
				l, dots, err := plotter.NewLinePoints(pts)
				if err != nil {
					return files, err
				}
				l.Color, dots.Color = plotter.DefaultLineStyle.Color, plotter.DefaultLineStyle.Color
				if i == 1 {
					l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
				}
				p.Add(l, dots)
				p.Legend.Add(s.name, l)
			}
			p.Legend.Top = c.file == "accuracy.png"
			p.Legend.Left = c.file == "accuracy.png"
			row = append(row, p)
		}
		panels = append(panels, row)
		img := vgimg.New(12*vg.Inch, 4.5*vg.Inch)
		dc := draw.New(img)
		canvases := plot.Align(panels, draw.Tiles{Rows: 1, Cols: 2, PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 2,
			PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}, dc)
		for j, p := range row {
			p.Draw(canvases[0][j])
		}
		path := filepath.Join(dir, c.file)
		if err := savePNG(img, path); err != nil {
			return files, fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}

func savePNG(img *vgimg.Canvas, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
