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
	"time"

	"github.com/vipproxy/vipproxy/internal/testpki"
)

// Main is the vipproxy-apiserver command: serve a stand-in apiserver,
// `pki --dir D --hosts a,b` to write a test PKI, or `load` to hold watches
// and open new connections through an address. It returns the exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "pki" {
		return runPKI(args[1:], stdout, stderr)
	}
	if len(args) > 0 && args[0] == "load" {
		return runLoad(ctx, args[1:], stderr)
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

// runLoad is `vipproxy-apiserver load`: RunLoad until SIGTERM, SIGUSR1
// closing a window.
func runLoad(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("vipproxy-apiserver load", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec LoadSpec
	var ca, cert, key, status, report string
	fs.StringVar(&spec.Target, "target", "", "host:port to connect to (the VIP); the server certificate is verified for host")
	fs.StringVar(&ca, "ca", "", "CA that the server certificate chains to (PEM)")
	fs.StringVar(&cert, "cert", "", "client certificate (PEM)")
	fs.StringVar(&key, "key", "", "client key (PEM)")
	fs.IntVar(&spec.Watches, "watches", 100, "/watch streams to hold, each reconnected when it ends")
	fs.DurationVar(&spec.ConnectEvery, "connect-every", 100*time.Millisecond, "open a new connection (GET /name) this often, once every watch has streamed")
	fs.DurationVar(&spec.Timeout, "timeout", time.Minute, "longest wait for a connection's answer or a watch's next line")
	fs.IntVar(&spec.Ramp, "ramp", 20, "watches connecting at once while they start")
	fs.StringVar(&status, "status", "", "write the current window's figures here (JSON) every 500 ms")
	fs.StringVar(&report, "report", "", "on SIGUSR1, write the window's figures here (JSON) and start the next window")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if spec.Target == "" || ca == "" || cert == "" || key == "" || status == "" || report == "" || fs.NArg() > 0 ||
		spec.Watches < 0 || spec.ConnectEvery <= 0 || spec.Timeout <= 0 {
		fmt.Fprintln(stderr, "usage: vipproxy-apiserver load --target HOST:PORT --ca F --cert F --key F --status F --report F [--watches N >= 0] [--connect-every D > 0] [--timeout D > 0]")
		return 2
	}
	tlsConf, err := (&testpki.Files{CA: ca, ClientCert: cert, ClientKey: key}).ClientTLS()
	if err != nil {
		fmt.Fprintf(stderr, "vipproxy-apiserver load: %v\n", err)
		return 2
	}
	spec.TLS = tlsConf
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	if err := RunLoad(ctx, spec, usr1, status, report); err != nil {
		fmt.Fprintf(stderr, "vipproxy-apiserver load: %v\n", err)
		return 1
	}
	return 0
}
