package standin

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// Main is the vipproxy-apiserver command: serve a stand-in apiserver, or
// `pki --dir D --hosts a,b` to write a test PKI. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "pki" {
		return runPKI(args[1:], stdout, stderr)
	}
	return runServer(ctx, args, stderr)
}

func runPKI(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipproxy-apiserver pki", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "directory to write ca.pem, server.pem, client.pem and their keys into")
	hosts := fs.String("hosts", "", "comma-separated IPs/names for the server certificate (127.0.0.1, ::1, localhost are always in)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "usage: vipproxy-apiserver pki --dir DIR [--hosts a,b]")
		return 2
	}
	var list []string
	for _, h := range strings.Split(*hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			list = append(list, h)
		}
	}
	files, err := testpki.Write(*dir, list)
	if err != nil {
		fmt.Fprintf(stderr, "vipproxy-apiserver pki: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "ca=%s\nserver_cert=%s\nserver_key=%s\nclient_cert=%s\nclient_key=%s\n",
		files.CA, files.ServerCert, files.ServerKey, files.ClientCert, files.ClientKey)
	return 0
}

func runServer(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipproxy-apiserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var opts Options
	var certFile, keyFile, clientCA, level, endpointsFile string
	fs.StringVar(&opts.Listen, "listen", "127.0.0.1:6443", "host:port to listen on")
	fs.StringVar(&opts.Name, "name", "", "name returned by /name (default: the listen address)")
	fs.StringVar(&certFile, "cert", "", "server certificate (PEM)")
	fs.StringVar(&keyFile, "key", "", "server key (PEM)")
	fs.StringVar(&clientCA, "client-ca", "", "CA that client certificates must chain to (mTLS is required)")
	fs.BoolVar(&opts.Hang, "hang", false, "accept TCP connections and never answer")
	fs.BoolVar(&opts.PermitPortSharing, "permit-port-sharing", false, "bind with SO_REUSEPORT, as kube-apiserver --permit-port-sharing=true")
	anonymous := fs.Bool("anonymous-auth", true, "false: as kube-apiserver --anonymous-auth=false (k3s, RKE2): a client certificate is optional in the handshake and a request without one gets 401")
	fs.StringVar(&opts.FailFile, "fail-file", "", "/readyz returns 500 while this file exists")
	fs.StringVar(&opts.ReadyFile, "ready-file", "", "/readyz returns 500 while this file does not exist")
	fs.DurationVar(&opts.HeaderTimeout, "header-timeout", 0, "how long a client may take for its TLS handshake and request header (default 60s)")
	fs.DurationVar(&opts.WatchInterval, "watch-interval", 0, "time between /watch lines (default 200ms)")
	fs.StringVar(&endpointsFile, "endpoints-file", "", "serve the kubernetes EndpointSlices with these endpoints, one host:port a line, read again when the file changes")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "vipproxy-apiserver: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	if opts.Name == "" {
		opts.Name = opts.Listen
	}
	opts.AnonymousOff = !*anonymous
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		fmt.Fprintf(stderr, "vipproxy-apiserver: --log-level: %v\n", err)
		return 2
	}
	opts.Logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if !opts.Hang {
		if certFile == "" || keyFile == "" || clientCA == "" {
			fmt.Fprintln(stderr, "vipproxy-apiserver: --cert, --key and --client-ca are required (or --hang)")
			return 2
		}
		files := &testpki.Files{CA: clientCA, ServerCert: certFile, ServerKey: keyFile}
		tlsConf, err := files.ServerTLS()
		if err != nil {
			fmt.Fprintf(stderr, "vipproxy-apiserver: %v\n", err)
			return 2
		}
		opts.TLS = tlsConf
	}
	if endpointsFile != "" {
		ctx, cancel := context.WithCancel(ctx) // ends the file's follower on every return
		defer cancel()
		opts.Slices = NewEndpointSlices()
		if err := followEndpointsFile(ctx, endpointsFile, opts.Slices, opts.Logger); err != nil {
			fmt.Fprintf(stderr, "vipproxy-apiserver: --endpoints-file: %v\n", err)
			return 2
		}
	}
	return serveUntilDone(ctx, opts)
}

// serveUntilDone runs the server until ctx ends; SIGUSR1 toggles /readyz.
func serveUntilDone(ctx context.Context, opts Options) int {
	srv, err := New(opts)
	if err != nil {
		opts.Logger.Error("start", "err", err)
		return 2
	}
	// Catch SIGUSR1 before serving: once /readyz answers, a test may signal.
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	if err := srv.Start(ctx); err != nil {
		opts.Logger.Error("start", "err", err)
		return 1
	}
	defer srv.Close()
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-usr1:
			srv.SetReady(!srv.ready.Load())
		}
	}
}
