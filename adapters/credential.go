package adapters

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/idemgate/idemgate/redact"
)

// ErrNoCredential is returned when no credential source is configured or
// the configured one is empty.
var ErrNoCredential = errors.New("no credential configured")

// Credential says where one secret comes from: Value when set; else the
// first line of File (surrounding space trimmed); else the environment
// variable Env. An adapter's Config holds it under the target's word for
// the secret: one of Token, Password, SecretKey and WebhookCode, embedded
// squashed, and defaults Env to a variable of its own.
type Credential struct {
	Value redact.Secret
	File  string
	Env   string
}

// Load resolves the credential; getenv nil means os.Getenv. Errors name the
// source, never the value.
func (c Credential) Load(getenv func(string) string) (redact.Secret, error) {
	if c.Value != "" {
		return c.Value, nil
	}
	if c.File != "" {
		b, err := os.ReadFile(c.File)
		if err != nil {
			return "", fmt.Errorf("read credential file %s: %w", c.File, err)
		}
		s := strings.TrimSpace(string(b))
		if i := strings.IndexAny(s, "\r\n"); i >= 0 {
			s = strings.TrimSpace(s[:i])
		}
		if s == "" {
			return "", fmt.Errorf("credential file %s: %w", c.File, ErrNoCredential)
		}
		return redact.Secret(s), nil
	}
	if c.Env != "" {
		if getenv == nil {
			getenv = os.Getenv
		}
		if v := strings.TrimSpace(getenv(c.Env)); v != "" {
			return redact.Secret(v), nil
		}
		return "", fmt.Errorf("environment variable %s: %w", c.Env, ErrNoCredential)
	}
	return "", ErrNoCredential
}

// Token, Password, SecretKey and WebhookCode are a Credential under the keys
// of one word for the secret: the value, <word>_file and <word>_env. An
// adapter's Config holds the one its target speaks of as a field squashed
// into its own keys (`mapstructure:",squash"`: adapters.amocrm.token,
// token_file, token_env) and converts it to a Credential to load it.
type (
	// Token is token, token_file and token_env.
	Token struct {
		Value redact.Secret `mapstructure:"token"`
		File  string        `mapstructure:"token_file"`
		Env   string        `mapstructure:"token_env"`
	}
	// Password is password, password_file and password_env.
	Password struct {
		Value redact.Secret `mapstructure:"password"`
		File  string        `mapstructure:"password_file"`
		Env   string        `mapstructure:"password_env"`
	}
	// SecretKey is secret_key, secret_key_file and secret_key_env.
	SecretKey struct {
		Value redact.Secret `mapstructure:"secret_key"`
		File  string        `mapstructure:"secret_key_file"`
		Env   string        `mapstructure:"secret_key_env"`
	}
	// WebhookCode is webhook_code, webhook_code_file and webhook_code_env.
	WebhookCode struct {
		Value redact.Secret `mapstructure:"webhook_code"`
		File  string        `mapstructure:"webhook_code_file"`
		Env   string        `mapstructure:"webhook_code_env"`
	}
)
