// Package flagdapi evaluates flags over flagd's HTTP (Connect) evaluation
// API, flagd.evaluation.v1.Service, the way an OpenFeature provider in RPC
// mode asks a flagd sidecar: for the suites that run flagd for real and for
// the demo.
package flagdapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// Evaluation is flagd's answer to one evaluation. Code is set instead of
// the rest when flagd answers with an error (e.g. "not_found").
type Evaluation struct {
	Value   any    `json:"value"`
	Variant string `json:"variant"`
	Reason  string `json:"reason"`
	Code    string `json:"code,omitempty"`
}

// Type is the flag type of a Resolve call: Boolean, String, Int, Float or Object.
type Type string

// The flag types of flagd's evaluation API.
const (
	Boolean Type = "Boolean"
	String  Type = "String"
	Int     Type = "Int"
	Float   Type = "Float"
	Object  Type = "Object"
)

var client = &http.Client{Timeout: 2 * time.Second}

// Resolve evaluates flagKey of type t at flagd's evaluation address addr
// (host:port) with the given evaluation context (nil for none).
func Resolve(ctx context.Context, addr string, t Type, flagKey string, evalContext map[string]any) (Evaluation, error) {
	if evalContext == nil {
		evalContext = map[string]any{}
	}
	body, err := json.Marshal(map[string]any{"flagKey": flagKey, "context": evalContext})
	if err != nil {
		return Evaluation{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/flagd.evaluation.v1.Service/Resolve"+string(t), bytes.NewReader(body))
	if err != nil {
		return Evaluation{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return Evaluation{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return Evaluation{}, fmt.Errorf("reading flagd's answer: %w", err)
	}
	var e Evaluation
	if err := json.Unmarshal(data, &e); err != nil {
		return Evaluation{}, fmt.Errorf("decoding flagd's answer %q (%s): %w", data, resp.Status, err)
	}
	return e, nil
}
