package config

import (
	"errors"
	"fmt"
	"os"

	"github.com/BurntSushi/toml"
)

// Error is a configuration problem: the file, the key and, where the
// decoder knows it, the line.
type Error struct {
	File   string
	Key    string
	Line   int
	Reason string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", loc, e.Reason)
	}
	return fmt.Sprintf("%s: %s: %s", loc, e.Key, e.Reason)
}

// Load reads, decodes and validates the file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(path, data)
}

// Parse decodes and validates data as if read from the file name.
func Parse(name string, data []byte) (*Config, error) {
	cfg := Default()
	cfg.Path = name
	md, err := toml.Decode(string(data), &cfg)
	if err != nil {
		return nil, decodeError(name, err)
	}
	if und := md.Undecoded(); len(und) > 0 {
		return nil, &Error{File: name, Key: und[0].String(), Reason: "unknown key"}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// decodeError turns a TOML decoder error into an Error with key and line.
func decodeError(name string, err error) error {
	var perr toml.ParseError
	if errors.As(err, &perr) {
		return &Error{File: name, Key: perr.LastKey, Line: perr.Position.Line, Reason: perr.Message}
	}
	return &Error{File: name, Reason: err.Error()}
}
