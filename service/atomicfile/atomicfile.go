// Package atomicfile replaces files so that a reader sees either the old or
// the new content, never a mix, and a set of files either all change or none.
package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// File is one file to write: where, what, and with which permissions.
type File struct {
	Path string
	Data []byte
	Perm fs.FileMode
}

// WriteFunc writes one file atomically. Tests swap it to inject failures.
type WriteFunc func(path string, data []byte, perm fs.FileMode) error

// Write replaces path with data: a temporary file in the same directory is
// written, synced and renamed over path, then the directory is synced, so a
// crash leaves either the old or the new file.
func Write(path string, data []byte, perm fs.FileMode) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Chmod(perm); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: sync: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", dir, err)
	}
	return nil
}

// unchanged reports whether path already holds exactly data.
func unchanged(path string, data []byte) bool {
	old, err := os.ReadFile(path)
	return err == nil && bytes.Equal(old, data)
}

// WriteSet writes every file whose content differs, creating parent
// directories, and returns the paths it changed. If one write fails, the
// files already replaced by this call get their old content back (or are
// removed if they did not exist), so nothing is half-applied.
func WriteSet(files []File, write WriteFunc) (changed []string, err error) {
	changed, _, err = WriteSetUndo(files, write)
	return changed, err
}

// backup is what was at a path before WriteSetUndo replaced it.
type backup struct {
	path    string
	existed bool
	link    string // the target, when it was a symbolic link
	data    []byte
	perm    fs.FileMode
}

// takeBackup records what is at path now: nothing, a symbolic link (not
// followed: put back as a link, not as a copy of its target), or a file.
func takeBackup(path string) (backup, error) {
	b := backup{path: path}
	st, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("read %s: %w", path, err)
	}
	b.existed = true
	if st.Mode().Type() == fs.ModeSymlink {
		b.link, err = os.Readlink(path)
		if err != nil {
			return b, fmt.Errorf("read %s: %w", path, err)
		}
		return b, nil
	}
	b.perm = st.Mode().Perm()
	if b.data, err = os.ReadFile(path); err != nil {
		return b, fmt.Errorf("read %s: %w", path, err)
	}
	return b, nil
}

// restore puts back exactly what takeBackup saw.
func (b backup) restore() error {
	switch {
	case !b.existed:
		if err := os.Remove(b.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	case b.link != "":
		return symlink(b.link, b.path)
	default:
		return Write(b.path, b.data, b.perm)
	}
}

// symlink replaces path with a symbolic link to target atomically: the
// link is made under a temporary name, then renamed over path.
func symlink(target, path string) error {
	tmp := filepath.Join(filepath.Dir(path), fmt.Sprintf(".%s.link-%d", filepath.Base(path), os.Getpid()))
	os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return fmt.Errorf("restore link %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore link %s: %w", path, err)
	}
	return syncDir(filepath.Dir(path))
}

// WriteSetUndo is WriteSet that also returns undo, which puts back what the
// call changed: for callers whose later steps can still fail.
func WriteSetUndo(files []File, write WriteFunc) (changed []string, undo func() error, err error) {
	if write == nil {
		write = Write
	}
	var done []backup
	restore := func() error {
		var errs []error
		for i := len(done) - 1; i >= 0; i-- {
			errs = append(errs, done[i].restore())
		}
		return errors.Join(errs...)
	}
	for _, f := range files {
		if unchanged(f.Path, f.Data) {
			continue
		}
		b, err := takeBackup(f.Path)
		if err != nil {
			return nil, nil, errors.Join(err, restore())
		}
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return nil, nil, errors.Join(fmt.Errorf("create %s: %w", filepath.Dir(f.Path), err), restore())
		}
		if err := write(f.Path, f.Data, f.Perm); err != nil {
			if rerr := restore(); rerr != nil {
				return nil, nil, errors.Join(err, fmt.Errorf("restore earlier files: %w", rerr))
			}
			return nil, nil, fmt.Errorf("%w (files written before it were restored)", err)
		}
		done = append(done, b)
		changed = append(changed, f.Path)
	}
	return changed, restore, nil
}
