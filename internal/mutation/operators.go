// Package mutation is rlverify's mutation study: it makes small changes
// (mutants) to a rate-limiter library nobody here wrote, serves each mutant
// behind a small HTTP shell (cmd/shell), judges it with rlverify's audit
// and with the library's own unit tests, and says which of the two killed
// it. The library's code is never copied into this repository: mutants are
// made at test time from the module cache's source, applied to a
// temporary copy of the module through `go build -overlay`, and thrown
// away afterwards.
//
// It is a test helper (docs/architecture.md): nothing of the product
// imports it. Its results are docs/mutation.md.
package mutation

import (
	"bytes"
	"cmp"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
)

// The mutation operators.
const (
	// OpCompare flips a comparison: < ↔ <=, > ↔ >=, == ↔ !=.
	OpCompare = "compare"
	// OpLogic swaps && and ||.
	OpLogic = "logic"
	// OpArith swaps + and −, * and /.
	OpArith = "arith"
	// OpConst adds one to an integer literal (an off-by-one).
	OpConst = "const"
	// OpDrop removes a statement (an assignment, a call, an increment or
	// a whole if).
	OpDrop = "drop"
	// OpNegate negates an if's condition (its branches swap) or removes a
	// logical not.
	OpNegate = "negate"
)

var flips = map[token.Token]token.Token{
	token.LSS: token.LEQ, token.LEQ: token.LSS,
	token.GTR: token.GEQ, token.GEQ: token.GTR,
	token.EQL: token.NEQ, token.NEQ: token.EQL,
	token.LAND: token.LOR, token.LOR: token.LAND,
	token.ADD: token.SUB, token.SUB: token.ADD,
	token.MUL: token.QUO, token.QUO: token.MUL,
}

// Mutant is one small change to one file of a module: the bytes
// [Offset, End) of File replaced by To.
type Mutant struct {
	// File is the file's path inside the module, slash-separated.
	File string
	// Line and Col place the change (1-based, bytes), Func names the
	// function it is in ("(*T).M", "F", or "" at package level).
	Line, Col int
	Func      string
	Op        string
	// From is the text replaced, To its replacement.
	From, To    string
	Offset, End int
}

// ID names the mutant stably for a given version of the file:
// FILE:LINE:COL:OP.
func (m Mutant) ID() string {
	return fmt.Sprintf("%s:%d:%d:%s", m.File, m.Line, m.Col, m.Op)
}

// Change says what the mutant does, in one short line of code.
func (m Mutant) Change() string {
	if m.Op == OpDrop {
		return "drop `" + oneLine(m.From) + "`"
	}
	return "`" + oneLine(m.From) + "` → `" + oneLine(m.To) + "`"
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 60 {
		s = s[:57] + "…"
	}
	return s
}

// Apply returns src with the mutant's change made. src must be the file
// the mutant was generated from.
func (m Mutant) Apply(src []byte) ([]byte, error) {
	if m.Offset < 0 || m.End > len(src) || m.Offset > m.End || string(src[m.Offset:m.End]) != m.From {
		return nil, fmt.Errorf("mutation: %s: the file does not hold %q there (another version of it?)", m.ID(), oneLine(m.From))
	}
	out := make([]byte, 0, len(src)+len(m.To))
	out = append(out, src[:m.Offset]...)
	out = append(out, m.To...)
	return append(out, src[m.End:]...), nil
}

// Generate lists every mutant of one Go source file, in the order of the
// file. name is the file's path inside its module. Mutants that do not
// compile (a + between strings turned into −, a dropped statement whose
// variable is then unused) are listed too: a build says so.
func Generate(name string, src []byte) ([]Mutant, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, fmt.Errorf("mutation: parse %s: %w", name, err)
	}
	g := gen{fset: fset, src: src, name: name}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		g.fn = funcName(fd)
		ast.Inspect(fd.Body, g.visit)
	}
	slices.SortStableFunc(g.out, func(a, b Mutant) int { return cmp.Compare(a.Offset, b.Offset) })
	return g.out, nil
}

type gen struct {
	fset *token.FileSet
	src  []byte
	name string
	fn   string
	out  []Mutant
}

func (g *gen) add(op string, from, to token.Pos, repl string) {
	p := g.fset.Position(from)
	end := g.fset.Position(to).Offset
	g.out = append(g.out, Mutant{
		File: g.name, Line: p.Line, Col: p.Column, Func: g.fn, Op: op,
		From: string(g.src[p.Offset:end]), To: repl, Offset: p.Offset, End: end,
	})
}

func (g *gen) text(n ast.Node) string {
	return string(g.src[g.fset.Position(n.Pos()).Offset:g.fset.Position(n.End()).Offset])
}

func (g *gen) visit(n ast.Node) bool {
	switch n := n.(type) {
	case *ast.BinaryExpr:
		if to, ok := flips[n.Op]; ok {
			op := OpCompare
			switch n.Op {
			case token.LAND, token.LOR:
				op = OpLogic
			case token.ADD, token.SUB, token.MUL, token.QUO:
				op = OpArith
			}
			g.add(op, n.OpPos, n.OpPos+token.Pos(len(n.Op.String())), to.String())
		}
	case *ast.UnaryExpr:
		if n.Op == token.NOT {
			g.add(OpNegate, n.Pos(), n.End(), g.text(n.X))
		}
	case *ast.BasicLit:
		if n.Kind == token.INT {
			if v, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
				g.add(OpConst, n.Pos(), n.End(), strconv.FormatInt(v+1, 10))
			}
		}
	case *ast.IfStmt:
		if u, ok := n.Cond.(*ast.UnaryExpr); ok && u.Op == token.NOT {
			break // removing the not (above) swaps these branches already
		}
		g.add(OpNegate, n.Cond.Pos(), n.Cond.End(), "!("+g.text(n.Cond)+")")
	case *ast.BlockStmt:
		g.drops(n.List)
	case *ast.CaseClause:
		g.drops(n.Body)
	}
	return true
}

// drops adds a mutant removing each droppable statement of a list. The
// removed text's newlines stay, so every later line keeps its number.
func (g *gen) drops(list []ast.Stmt) {
	for _, s := range list {
		switch s := s.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				continue // its variables would be undefined: never builds
			}
		case *ast.ExprStmt, *ast.IncDecStmt, *ast.IfStmt:
		default:
			continue
		}
		text := g.text(s)
		g.add(OpDrop, s.Pos(), s.End(), strings.Repeat("\n", bytes.Count([]byte(text), []byte("\n"))))
	}
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return "(" + star + id.Name + ")." + fd.Name.Name
	}
	return fd.Name.Name
}
