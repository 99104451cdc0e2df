// The journal's own SQL, read from journal/postgres's source.

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"strconv"

	"github.com/idemgate/idemgate/operation"
)

// queries are the statements journal/postgres sends, read from its source
// so that the baseline cannot drift from the store.
type queries struct {
	selectRecords, claimInsert, claimTakeOver, complete string
}

func journalSQL(path string) (queries, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		return queries{}, fmt.Errorf("journal SQL: %w", err)
	}
	decls := map[string]ast.Expr{}
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.CONST {
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, name := range vs.Names {
					if i < len(vs.Values) {
						decls[name.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	var eval func(ast.Expr) (string, error)
	eval = func(e ast.Expr) (string, error) {
		switch e := e.(type) {
		case *ast.BasicLit:
			return strconv.Unquote(e.Value)
		case *ast.Ident:
			v, ok := decls[e.Name]
			if !ok {
				return "", fmt.Errorf("journal SQL: no constant %s", e.Name)
			}
			return eval(v)
		case *ast.BinaryExpr:
			if e.Op == token.ADD {
				x, err := eval(e.X)
				if err != nil {
					return "", err
				}
				y, err := eval(e.Y)
				return x + y, err
			}
		case *ast.ParenExpr:
			return eval(e.X)
		}
		return "", fmt.Errorf("journal SQL: cannot evaluate %T", e)
	}
	var q queries
	for name, dst := range map[string]*string{"selectRecords": &q.selectRecords, "claimInsert": &q.claimInsert,
		"claimTakeOver": &q.claimTakeOver, "complete": &q.complete} {
		if *dst, err = eval(&ast.Ident{Name: name}); err != nil {
			return q, err
		}
	}
	return q, nil
}

// keyOf is the operation key the daemon derives from a command.
func keyOf(c *operation.Command) string {
	intent := c.IntentID
	if intent == "" {
		intent = c.EventID
	}
	return env + ":" + c.Operation + ":" + intent + ":" + operation.DefaultKeyVersion
}

func hashOf(payload []byte) string {
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:])
}
