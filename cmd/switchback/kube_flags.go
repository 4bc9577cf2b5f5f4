package main

import (
	"errors"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeFlags choose the cluster as kubectl's --kubeconfig and --context do.
type kubeFlags struct {
	kubeconfig string
	context    string
}

// register adds --kubeconfig and --context; what says what the cluster is
// read for, e.g. "with --data-plane longhorn: ".
func (f *kubeFlags) register(fs *pflag.FlagSet, what string) {
	inSection(fs, flagsKubernetes, func() {
		fs.StringVar(&f.kubeconfig, "kubeconfig", "", what+"the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config, else the pod's in-cluster configuration)")
		fs.StringVar(&f.context, "context", "", what+"the kubeconfig context to use (default: its current context)")
	})
}

// given says whether the user named a cluster.
func (f *kubeFlags) given() bool { return f.kubeconfig != "" || f.context != "" }

// config loads the configuration with Switchback's client rate limits.
func (f *kubeFlags) config() (*rest.Config, error) { return kubeConfig(f.kubeconfig, f.context) }

// kubeConfig loads a kubeconfig the way kubectl does (path, else
// $KUBECONFIG, else ~/.kube/config; kubeContext "" = its current context),
// falling back to the in-cluster configuration in a pod, with Switchback's
// client rate limits.
func kubeConfig(path, kubeContext string) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kubeContext})
	cfg, err := loader.ClientConfig()
	switch {
	case clientcmd.IsEmptyConfig(err):
		return nil, errors.New("no cluster to talk to: give --kubeconfig (or set $KUBECONFIG, or write ~/.kube/config), or run in a pod")
	case err != nil:
		return nil, fmt.Errorf("kubeconfig %s: %w", describeKubeconfig(path, kubeContext), err)
	}
	cfg.QPS, cfg.Burst = defaultKubeQPS, defaultKubeBurst
	return cfg, nil
}

func describeKubeconfig(path, kubeContext string) string {
	s := "(default loading rules)"
	if path != "" {
		s = fmt.Sprintf("%q", path)
	}
	if kubeContext != "" {
		s += fmt.Sprintf(", context %q", kubeContext)
	}
	return s
}
