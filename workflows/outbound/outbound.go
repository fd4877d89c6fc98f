// Package outbound is the one client of every read the manager makes of an
// address a tenant controls: a pod's IP at its flagd's management or sync
// port (the staged-delivery gates, the confirmation of what flagd serves),
// or the Prometheus a rollout policy names. Whoever answers there may be
// hostile, so the client
//
//   - follows no redirect (an answer of 3xx is an error: a pod that answers
//     302 must not send the manager's GETs anywhere else);
//   - uses no proxy of the manager's environment (HTTP_PROXY would carry
//     tenants' reads to a proxy, and let one address reach another);
//   - bounds the time of each read (dial, headers and body together: a
//     peer that never answers, or trickles its answer, costs ReadTimeout)
//     and the bytes it reads (a larger answer is an error);
//   - keeps no idle connection to a pod (pods come and go; a connection
//     kept open is a socket the tenant holds).
package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"
)

// Client is the client of every read the manager makes of a tenant's
// address.
type Client struct {
	// ReadTimeout bounds one read, from dial to the last byte of the body
	// (default 2s).
	ReadTimeout time.Duration
	// MaxBytes bounds the body of one answer (default 8 MiB).
	MaxBytes int64

	client *http.Client
}

// Defaults of Client.
const (
	DefaultReadTimeout = 2 * time.Second
	DefaultMaxBytes    = 8 << 20
)

// New makes the client, with the defaults for what o leaves zero.
func New(o Client) *Client {
	if o.ReadTimeout <= 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	dialer := &net.Dialer{Timeout: o.ReadTimeout}
	o.client = &http.Client{
		Transport: &http.Transport{
			Proxy:                  nil,
			DialContext:            dialer.DialContext,
			TLSHandshakeTimeout:    o.ReadTimeout,
			ResponseHeaderTimeout:  o.ReadTimeout,
			DisableKeepAlives:      true,
			MaxResponseHeaderBytes: 64 << 10,
			DisableCompression:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       o.ReadTimeout,
	}
	return &o
}

// ErrTooLarge is the error of an answer larger than MaxBytes.
var ErrTooLarge = errors.New("the answer is larger than the manager reads")

// Get reads address with GET, and hands the body of a 200 answer to read,
// which must read no more than it is given (at most MaxBytes, then
// ErrTooLarge). Its errors are short and never repeat the address's query
// (they go into status): "connection refused", "answered 302 Found:
// redirects are not followed", "timed out after 2s".
func (o *Client) Get(ctx context.Context, address string, read func(io.Reader) error) error {
	ctx, cancel := context.WithTimeout(ctx, o.ReadTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, address, nil)
	if err != nil {
		return errors.New("not a URL the manager can read")
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return o.short(ctx, err)
	}
	defer func() {
		_ = resp.Body.Close()
	}()
	switch {
	case resp.StatusCode/100 == 3:
		return fmt.Errorf("answered %d: redirects are not followed", resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("answered %d", resp.StatusCode)
	}
	body := &capped{r: resp.Body, left: o.MaxBytes}
	if err := read(body); err != nil {
		if errors.Is(err, ErrTooLarge) || body.over {
			return fmt.Errorf("%w (%d bytes)", ErrTooLarge, o.MaxBytes)
		}
		if ctx.Err() != nil {
			return o.short(ctx, ctx.Err())
		}
		return err
	}
	return nil
}

// short makes a client error fit a status message: the URL (which may hold
// a query) is dropped, and a timeout says so.
func (o *Client) short(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("no answer within %s", o.ReadTimeout)
	}
	var uerr *url.Error
	if errors.As(err, &uerr) {
		err = uerr.Err
	}
	var operr *net.OpError
	if errors.As(err, &operr) && operr.Err != nil {
		return fmt.Errorf("%s: %w", operr.Op, operr.Err)
	}
	return err
}

// capped reads at most left bytes of r; one more is ErrTooLarge.
type capped struct {
	r    io.Reader
	left int64
	over bool
}

func (c *capped) Read(p []byte) (int, error) {
	if c.left <= 0 {
		// One byte more tells a body of exactly MaxBytes from a longer one.
		var one [1]byte
		n, err := c.r.Read(one[:])
		if n > 0 {
			c.over = true
			return 0, ErrTooLarge
		}
		return 0, err
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}
