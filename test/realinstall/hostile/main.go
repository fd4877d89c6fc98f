// Command hostile is a hostile tenant's server for test/realinstall: it
// listens on an address (a pod's flagd management port, taken before
// flagd can) and, for every request it gets, prints the request line and
//
//   - redirect URL: answers 302 to URL;
//   - silent: never answers (the connection stays open until the client
//     gives up).
//
// With -sync ADDRESS FILE first, it also answers flagd's sync service at
// ADDRESS (flagd's sync port, which flagd, kept from starting, cannot
// serve) with what flagd would serve of the flagd document in FILE, read
// at each call: the pod claims the flag set's revision its volume holds,
// as a tenant that controls its pod can.
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/flagplane/flagplane/test/fakesync"
)

func main() {
	args := os.Args[1:]
	if len(args) > 3 && args[0] == "-sync" {
		l, err := net.Listen("tcp", args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		file := args[2]
		fakesync.Serve(l, func() (map[string]any, error) {
			b, err := os.ReadFile(file)
			if err != nil {
				return nil, err
			}
			return fakesync.StoreFlags(b)
		})
		fmt.Println("answering flagd's sync service on", args[1], "from", file)
		args = args[3:]
	}
	if len(args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: hostile [-sync ADDRESS FILE] ADDRESS redirect URL | hostile [-sync ADDRESS FILE] ADDRESS silent")
		os.Exit(2)
	}
	os.Args = append(os.Args[:1], args...)
	l, err := net.Listen("tcp", os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("listening on", os.Args[1], "as", strings.Join(os.Args[2:], " "))
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go serve(c, os.Args[2:])
	}
}

func serve(c net.Conn, mode []string) {
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	fmt.Printf("%s %s from %s\n", time.Now().UTC().Format(time.RFC3339Nano), strings.TrimSpace(line), c.RemoteAddr())
	switch mode[0] {
	case "redirect":
		fmt.Fprintf(c, "HTTP/1.1 302 Found\r\nLocation: %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", mode[1])
	default:
		// Silent: hold the connection until the client closes it.
		_, _ = c.Read(make([]byte, 1))
		buf := make([]byte, 4096)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}
}
