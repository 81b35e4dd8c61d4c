package local

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/curate/curate/internal/provider"
)

// maxModelName bounds a model's name.
const maxModelName = 255

// modelsHint says where model names point, without showing the directory.
const modelsHint = "the name of a model directory in the models directory (CURATE_MODELS_DIR)"

// modelPath resolves a model name to its directory inside the models
// directory. A name is a relative, clean path ("tiny-llama" or
// "meta-llama/Llama-3.2-1B"): no absolute path, no "..", and no symlink
// that leads out of the models directory. Messages name the field and the
// name given, never anything else of the filesystem, so the check cannot
// be used to look around the server.
func (p *Provider) modelPath(field, name string) (string, *provider.FieldError) {
	bad := func(msg string) (string, *provider.FieldError) {
		return "", &provider.FieldError{Field: field, Message: msg}
	}
	switch {
	case name == "":
		return bad("is required: " + modelsHint)
	case len(name) > maxModelName || !utf8.ValidString(name) || strings.ContainsAny(name, "\x00\\"):
		return bad("must be " + modelsHint)
	case filepath.IsAbs(name) || !filepath.IsLocal(name) || filepath.Clean(name) != name ||
		slices.Contains(strings.Split(name, "/"), ".."):
		return bad("must be " + modelsHint + ", not a path")
	}
	notModel := func() (string, *provider.FieldError) {
		return bad(quote(name) + " is not a model directory in the models directory (CURATE_MODELS_DIR); the local trainer never downloads models")
	}
	root, err := filepath.EvalSymlinks(p.cfg.ModelsDir)
	if err != nil {
		return notModel()
	}
	dir, err := filepath.EvalSymlinks(filepath.Join(root, name))
	if err != nil || !strings.HasPrefix(dir, root+string(filepath.Separator)) {
		return notModel()
	}
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		return notModel()
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return bad(quote(name) + " has no config.json, so it is not a Hugging Face model directory")
		}
		return notModel()
	}
	return dir, nil
}

// quote writes a name for a message.
func quote(name string) string { return `"` + name + `"` }
