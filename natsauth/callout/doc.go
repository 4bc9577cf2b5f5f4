// Package callout gives every node worker its own NATS identity without a
// seed on disk, through NATS auth callout (server configuration mode, no
// operator): the worker connects with its pod's projected ServiceAccount
// token, nats-server forwards the connect to a Service subscribed to
// $SYS.REQ.USER.AUTH, and the Service answers with a user JWT that carries
// exactly natsauth.WorkerPermissions for the node the token names.
//
// Why: natsauth's per-node users need one credential per node, and a
// DaemonSet cannot mount a different Secret on each node (one pod template
// for all), so today every node holds every worker's seed
// (docs/nats-authorization.md). A projected token is minted by the kubelet
// for the one pod it is mounted in, and the apiserver records the node of
// that pod in it: the node a worker may act for then comes from Kubernetes,
// not from anything the worker holds or claims.
//
// How a connect is decided (Service):
//
//   - the request must be a valid authorization request signed by a server
//     key, for that same server, not expired, and not seen before (a
//     replayed request is refused); when Config.XKey is set it must be
//     encrypted to it, and the response is encrypted back;
//   - the connect token is verified with the Kubernetes TokenReview API
//     (KubeReviewer), for Config.Audience only; the user must be the
//     worker's ServiceAccount and the token must be bound to a pod on a node
//     (user extra authentication.kubernetes.io/node-name);
//   - the answer is a user JWT for the node, expiring with the token (or
//     Config.MaxTTL, whichever is first); anything else is answered with an
//     error response (never silence), logged with the reason and counted in
//     metrics.NATSCalloutDecisions. A TokenReview that fails (apiserver down) refuses.
//
// ServerConfig renders the nats-server side (the static users that bypass
// the callout: controller, callout service, reader), and TokenFile and
// WorkerOptions the worker's side, which re-read the token file on every
// reconnect because the kubelet rotates it.
package callout
