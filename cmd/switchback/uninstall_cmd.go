package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/switchback-dev/switchback/api/v1beta2"
	"github.com/switchback-dev/switchback/events"
	"github.com/switchback-dev/switchback/kubeclient"
)

// uninstallCommand prepares an uninstall: a manager still in flight holds a
// finalizer only the controller removes (after bringing its node to a safe
// point), so removing the controller first would leave the manager, and
// its CRD, stuck for good. It refuses while a manager is in flight (naming
// them), or with --cancel deletes them and waits for the controller to
// finish the cancels; then it says what to delete. It deletes nothing of
// the install itself, and never Longhorn's namespace or objects
// (docs/upgrade-flows.md, "Uninstalling").
func uninstallCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "uninstall", Args: noArgs,
		Example: "  switchback uninstall -n longhorn-system            # exit 1 naming the upgrades still in flight\n" +
			"  switchback uninstall --cancel --timeout 10m         # cancel them and wait until each is safe"}
	o := &uninstallOptions{}
	o.addFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, args []string) error { return o.run(cmd.Context(), cmd.OutOrStdout()) }
	return cmd
}

// uninstallOptions are `switchback uninstall`'s flags.
type uninstallOptions struct {
	kube      kubeFlags
	namespace string
	cancel    bool
	timeout   time.Duration
}

func (o *uninstallOptions) addFlags(fs *pflag.FlagSet) {
	o.kube.register(fs, "")
	fs.StringVarP(&o.namespace, "namespace", "n", "longhorn-system", "the managers' namespace (the controller's --namespace)")
	fs.BoolVar(&o.cancel, "cancel", false, "delete the managers still in flight and wait until the controller has brought their nodes to a safe point and let them go")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Minute, "with --cancel: how long to wait for the cancels")
}

// run refuses while a manager is in flight, or with --cancel cancels them
// and waits; then it says what to delete.
func (o *uninstallOptions) run(ctx context.Context, stdout io.Writer) error {
	cfg, err := o.kube.config()
	if err != nil {
		return err
	}
	kc, err := kubeclient.New(cfg)
	if err != nil {
		return err
	}
	managers := kc.Managers(o.namespace)
	inFlight, err := managersInFlight(ctx, managers)
	if err != nil {
		return explainKube(cfg.Host, "list the DataEngineUpgradeManagers in "+o.namespace, err)
	}
	if len(inFlight) > 0 && !o.cancel {
		return fmt.Errorf("upgrades in flight in %s: %s. Delete each manager first (kubectl delete lhum/<name> -n %s: the controller brings the node in flight to a safe point, then lets it go), or run `switchback uninstall --cancel`; removing the controller first would leave them stuck behind their finalizer",
			o.namespace, strings.Join(inFlight, ", "), o.namespace)
	}
	if len(inFlight) > 0 {
		for _, name := range inFlight {
			if err := managers.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete manager %s: %w", name, err)
			}
			fmt.Fprintf(stdout, "deleted manager %s/%s: the controller cancels it at a safe point\n", o.namespace, name)
		}
		wctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		if err := waitGone(wctx, managers, inFlight, stdout); err != nil {
			return err
		}
	}
	fmt.Fprintf(stdout, "no upgrade in flight in %s. Remove Switchback with `kubectl delete -k deploy/` (its CRDs, and every past upgrade's objects, stay);\n"+
		"then `kubectl delete -k deploy/crds` removes those too. Longhorn's namespace and objects are never part of either.\n", o.namespace)
	return nil
}

// managersInFlight lists the managers not ended (or being deleted, whose
// cancel is still bringing a node back), sorted.
func managersInFlight(ctx context.Context, managers *kubeclient.Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList]) ([]string, error) {
	list, err := managers.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, m := range list.Items {
		if !events.ManagerState(m.Status.State).Terminal() || m.DeletionTimestamp != nil {
			out = append(out, m.Name)
		}
	}
	slices.Sort(out)
	return out, nil
}

// waitGone waits until every named manager is gone, polling: a cancel takes
// as long as bringing a node back to a safe point does.
func waitGone(ctx context.Context, managers *kubeclient.Resource[*v1beta2.DataEngineUpgradeManager, *v1beta2.DataEngineUpgradeManagerList], names []string, stdout io.Writer) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		var left []string
		for _, n := range names {
			_, err := managers.Get(ctx, n)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil && !errors.Is(err, context.DeadlineExceeded):
				return fmt.Errorf("manager %s: %w", n, err)
			default:
				left = append(left, n)
			}
		}
		if len(left) == 0 {
			fmt.Fprintln(stdout, "every cancel reached its safe point")
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("still cancelling %s: is the controller running? (it alone removes their finalizer): %w", strings.Join(left, ", "), ctx.Err())
		case <-t.C:
		}
	}
}
