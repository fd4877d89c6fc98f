package gitopshealth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Argo CD's health statuses.
const (
	Healthy     = "Healthy"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Suspended   = "Suspended"
	Missing     = "Missing"
	Unknown     = "Unknown"
)

// Result is an Argo CD health: its status and message.
type Result struct {
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
}

// argoScriptTimeout is how long Argo CD lets a health script run.
const argoScriptTimeout = time.Second

// invalidHealthStatus is Argo CD's message for a script that returns a
// status it does not know.
const invalidHealthStatus = "Lua returned an invalid health status"

// Argo returns the health Argo CD shows of obj with flagplane's health check
// for its group and kind configured in argocd-cm (the Lua standard
// libraries off, as by default there). As Argo CD does, an object being
// deleted is Progressing ("Pending deletion") without running the script,
// and a script that fails gives Unknown with the error as its message,
// and the error.
func Argo(obj *unstructured.Unstructured) (Result, error) {
	if obj.GetDeletionTimestamp() != nil {
		return Result{Status: Progressing, Message: "Pending deletion"}, nil
	}
	script, err := argoHealthScript(obj.GroupVersionKind().GroupKind())
	if err != nil {
		return Result{}, err
	}
	res, err := runArgoHealth(script, obj.Object, false)
	if err != nil {
		return res, fmt.Errorf("failed to get resource health for %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return res, nil
}

// argoKey is Argo CD's key of a group and kind: group/Kind, or Kind for
// the core group. It is the script's directory under
// resource_customizations; argocd-cm spells it group_Kind.
func argoKey(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Group + "/" + gk.Kind
}

// argoHealthScript reads the health.lua of a group and kind.
func argoHealthScript(gk schema.GroupKind) (string, error) {
	dir, err := fromRoot(ArgoCustomizationsDir)
	if err != nil {
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(argoKey(gk)), "health.lua"))
	if err != nil {
		return "", fmt.Errorf("no Argo CD health check for %s: %w", gk, err)
	}
	return string(b), nil
}

// runArgoHealth runs a health script on an object's content as Argo CD
// does. openLibs is Argo CD's useOpenLibs: true for the scripts built into
// Argo CD (and its TestLuaHealthScript), false by default for argocd-cm's.
// Either way the package, base and table libraries are open. Argo CD also
// preloads a reduced os module (time and date, for require("os")), which
// this runner does not: flagplane's scripts use neither.
func runArgoHealth(script string, obj map[string]any, openLibs bool) (Result, error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: !openLibs})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), NRet: 0, Protect: true}, lua.LString(lib.name)); err != nil {
			return Result{}, fmt.Errorf("opening Lua library %q: %w", lib.name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), argoScriptTimeout)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("actionParams", l.CreateTable(0, 0))
	l.SetGlobal("obj", toLua(l, obj))

	fn, err := l.LoadString(script)
	if err == nil {
		l.Push(fn)
		err = l.PCall(0, lua.MultRet, nil)
	}
	if err != nil {
		// Argo CD shows a run-time error without Lua's stack trace.
		var apiErr *lua.ApiError
		if errors.As(err, &apiErr) && apiErr.Type == lua.ApiErrorRun {
			apiErr.StackTrace = ""
		}
		return Result{Status: Unknown, Message: err.Error()}, err
	}
	res, err := healthFromLua(l.Get(-1))
	if err != nil {
		return Result{Status: Unknown, Message: err.Error()}, err
	}
	return res, nil
}

// toLua converts an object's content, as decoded from JSON or YAML (or by
// the API machinery, with int64 numbers), into Lua values: a map into a
// table with string keys, a slice into a sequence, every number into a
// Lua number, a json.Number into a string; nil and any other type into nil.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case nil:
		return lua.LNil
	case bool:
		return lua.LBool(v)
	case string:
		return lua.LString(v)
	case json.Number:
		return lua.LString(v)
	case float64:
		return lua.LNumber(v)
	case int:
		return lua.LNumber(v)
	case int32:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(toLua(l, item))
		}
		return t
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetH(lua.LString(k), toLua(l, item))
		}
		return t
	}
	return lua.LNil
}

// healthFromLua reads a script's return value as Argo CD does: nothing
// (nil) is an empty health; a table is read as a JSON object with fields
// status and message, where a table that is empty or a sequence (an array
// in JSON) or a field of another type gives an empty health too; a status
// Argo CD does not know gives Unknown; any other value is an error.
func healthFromLua(v lua.LValue) (Result, error) {
	switch v.Type() {
	case lua.LTNil:
		return Result{}, nil
	case lua.LTTable:
	default:
		return Result{}, fmt.Errorf("expect table output from Lua script, not %s", v.Type())
	}
	t := v.(*lua.LTable)
	first, _ := t.Next(lua.LNil)
	switch first.Type() {
	case lua.LTNil, lua.LTNumber:
		return Result{}, nil
	case lua.LTString:
	default:
		return Result{}, errors.New("cannot encode mixed or invalid key types")
	}
	var keysErr error
	t.ForEach(func(k, _ lua.LValue) {
		if k.Type() != lua.LTString {
			keysErr = errors.New("cannot encode mixed or invalid key types")
		}
	})
	if keysErr != nil {
		return Result{}, keysErr
	}
	field := func(name string) (string, bool, error) {
		switch f := t.RawGetString(name); f.Type() {
		case lua.LTNil:
			return "", true, nil
		case lua.LTString:
			return f.String(), true, nil
		case lua.LTNumber, lua.LTBool, lua.LTTable:
			return "", false, nil
		default:
			return "", false, fmt.Errorf("cannot encode %s to JSON", f.Type())
		}
	}
	status, ok1, err := field("status")
	if err != nil {
		return Result{}, err
	}
	message, ok2, err := field("message")
	if err != nil {
		return Result{}, err
	}
	if !ok1 || !ok2 {
		return Result{}, nil
	}
	switch status {
	case Healthy, Progressing, Degraded, Suspended, Missing, Unknown:
		return Result{Status: status, Message: message}, nil
	}
	return Result{Status: Unknown, Message: invalidHealthStatus}, nil
}
