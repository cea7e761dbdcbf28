package pipe

import (
	"encoding/json"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestNoFileCycles keeps the root's files in one direction: pipe.go (the
// Pipeline and what it answers) uses no other file, build.go (building one)
// uses pipe.go, train.go (Fit) uses both; no two files use each other. A
// file uses another if it names an object (function, method, type, field,
// variable, constant) declared there.
func TestNoFileCycles(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the package against its dependencies' export data (go list -export)")
	}
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, n, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	exports, err := exportData()
	if err != nil {
		t.Skipf("no export data of the dependencies: %v", err)
	}
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		return os.Open(exports[path])
	})
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}, Selections: map[*ast.SelectorExpr]*types.Selection{}}
	pkg, err := (&types.Config{Importer: imp}).Check("github.com/pipefeed/pipe", fset, files, info)
	if err != nil {
		t.Fatal(err)
	}
	uses := map[string]map[string][]string{} // file → file → names
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || !obj.Pos().IsValid() {
			continue
		}
		if v, ok := obj.(*types.Var); ok && !v.IsField() && obj.Parent() != pkg.Scope() {
			continue // a local variable or parameter
		}
		if _, ok := obj.(*types.Func); !ok && obj.Parent() != nil && obj.Parent() != pkg.Scope() {
			if v, ok := obj.(*types.Var); !ok || !v.IsField() {
				continue // a local type or constant
			}
		}
		from, to := filepath.Base(fset.Position(id.Pos()).Filename), filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if uses[from] == nil {
			uses[from] = map[string][]string{}
		}
		if !slices.Contains(uses[from][to], obj.Name()) {
			uses[from][to] = append(uses[from][to], obj.Name())
		}
	}
	for a, tos := range uses {
		for b, why := range tos {
			if back, ok := uses[b][a]; ok && a < b {
				slices.Sort(why)
				slices.Sort(back)
				t.Errorf("%s and %s use each other: %s uses %v, %s uses %v", a, b, a, why, b, back)
			}
		}
	}
	if len(uses["pipe.go"]) > 0 {
		t.Errorf("pipe.go uses other files: %v", uses["pipe.go"])
	}
}

// exportData maps the import paths of the root's dependencies to their
// export data files, which go list builds.
func exportData() (map[string]string, error) {
	out, err := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export", ".").Output()
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct{ ImportPath, Export string }
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		m[p.ImportPath] = p.Export
	}
	return m, nil
}
