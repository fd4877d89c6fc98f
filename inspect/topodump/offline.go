package topodump

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flagplane/flagplane/topology"
	"github.com/flagplane/flagplane/workflows/flagsets"
	"github.com/flagplane/flagplane/workflows/manifests"
)

// FromDir builds the topology offline from the manifests under dir (*.yaml,
// *.yml, *.json, recursively, in lexical order), the way the controllers
// build it from informers, and returns its DOT. Objects without a namespace
// are put in defaultNamespace, as `kubectl apply -n` would. Kinds that
// flagplane does not read are skipped.
func FromDir(dir, defaultNamespace string, opts ...topology.Option) ([]byte, error) {
	t, err := LoadDir(dir, defaultNamespace, opts...)
	if err != nil {
		return nil, err
	}
	return t.DOT(), nil
}

// LoadDir is FromDir's graph.
func LoadDir(dir, defaultNamespace string, opts ...topology.Option) (*topology.Topology, error) {
	files, err := manifestFiles(dir)
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml, *.yml or *.json files under %s", dir)
	}
	var stream bytes.Buffer
	for _, f := range files {
		if err := appendWithNamespace(&stream, f, defaultNamespace); err != nil {
			return nil, err
		}
	}
	t := topology.New(append(flagsets.NewValidator(false).TopologyOptions(), opts...)...)
	if err := manifests.Load(t, &stream); err != nil {
		return nil, fmt.Errorf("building the topology from %s: %w", dir, err)
	}
	return t, nil
}

func manifestFiles(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		if !d.IsDir() && slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	slices.Sort(files)
	return files, nil
}

// appendWithNamespace appends the documents of a file to a JSON stream,
// setting the namespace of those without one. Every kind that flagplane
// reads is namespaced.
func appendWithNamespace(w *bytes.Buffer, path, namespace string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for i := 0; ; i++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		if u.GetKind() == "" {
			continue
		}
		if u.GetNamespace() == "" {
			u.SetNamespace(namespace)
		}
		b, err := json.Marshal(obj)
		if err != nil {
			return fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		w.Write(b)
		w.WriteByte('\n')
	}
}
