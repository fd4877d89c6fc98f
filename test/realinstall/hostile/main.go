// Command hostile is a hostile tenant's server for test/realinstall: it
// listens on an address (a pod's flagd management port, taken before
// flagd can) and, for every request it gets, prints the request line and
//
//   - redirect URL: answers 302 to URL;
//   - silent: never answers (the connection stays open until the client
//     gives up).
package main

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: hostile ADDRESS redirect URL | hostile ADDRESS silent")
		os.Exit(2)
	}
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
