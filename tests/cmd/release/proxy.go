package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// writeProxy lays out dir as a module proxy (the GOPROXY protocol, which the
// go command reads from a file:// URL) that serves each of mods at version,
// packed from its directory under root as it is on disk (see writeZip):
//
//	<escaped module path>/@v/list          the version
//	<escaped module path>/@v/<version>.info {"Version": ..., "Time": ...}
//	<escaped module path>/@v/<version>.mod  the module's go.mod
//	<escaped module path>/@v/<version>.zip  the module zip (golang.org/x/mod/zip)
func writeProxy(dir, root string, mods []*repoModule, version string, stamp time.Time) error {
	for _, m := range mods {
		if err := writeProxyModule(dir, root, m, version, stamp); err != nil {
			return fmt.Errorf("%s: %w", m.Dir, err)
		}
	}
	return nil
}

func writeProxyModule(dir, root string, m *repoModule, version string, stamp time.Time) error {
	escPath, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	escVersion, err := module.EscapeVersion(version)
	if err != nil {
		return err
	}
	vdir := filepath.Join(dir, filepath.FromSlash(escPath), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return err
	}
	src := filepath.Join(root, filepath.FromSlash(m.Dir))
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, stamp.UTC()})
	if err != nil {
		return err
	}
	files := []struct {
		name string
		data []byte
	}{
		{"list", []byte(version + "\n")},
		{escVersion + ".info", info},
		{escVersion + ".mod", gomod},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(vdir, f.name), f.data, 0o644); err != nil {
			return err
		}
	}
	return writeZip(filepath.Join(vdir, escVersion+".zip"), root, src, module.Version{Path: m.Path, Version: version})
}

// writeZip packs the module in src as the go command does for a tag of the
// repository at root: every file under a "path@version/" prefix, without
// nested modules, vendor directories or version-control metadata, within
// the size limits; and, as the go command does for a module in a
// subdirectory, the repository's LICENSE when the module has none.
func writeZip(name, root, src string, mv module.Version) (err error) {
	checked, err := modzip.CheckDir(src)
	if err != nil {
		return err
	}
	var files []modzip.File
	haveLicense := false
	for _, name := range checked.Valid { // paths on disk
		rel, err := filepath.Rel(src, name)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		haveLicense = haveLicense || rel == "LICENSE"
		files = append(files, diskFile{rel, name})
	}
	license := filepath.Join(root, "LICENSE")
	if !haveLicense && src != root {
		if _, err := os.Lstat(license); err == nil {
			files = append(files, diskFile{"LICENSE", license})
		}
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	return modzip.Create(f, mv, files)
}

// A diskFile is a file of a module zip read from disk.
type diskFile struct {
	path string // in the module: slash-separated, relative
	name string // on disk
}

func (f diskFile) Path() string                 { return f.path }
func (f diskFile) Lstat() (os.FileInfo, error)  { return os.Lstat(f.name) }
func (f diskFile) Open() (io.ReadCloser, error) { return os.Open(f.name) }
