#!/usr/bin/env bash
# Starts a throwaway etcd + kube-apiserver on loopback for people (`make
# testenv-up`); Go tests use the testenv package instead, which does the same
# from Go. Usage: start.sh <workdir>
#
# Writes <workdir>/kubeconfig (admin, system:masters), pki/, logs and pid
# files, installs the CRDs of deploy/crds, and prints an `export KUBECONFIG=`
# line. Stop with stop.sh <workdir>.
#
# Env: K8S_BIN_DIR (default <repo>/.cache/k8s/v1.37.2), NO_CRDS=1 to skip
# the CRDs.
#
# Never export shell variables named ETCD_*: etcd reads each one as a flag.
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 <workdir>" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${K8S_BIN_DIR:-$root/.cache/k8s/v1.37.2}
mkdir -p "$1"
work=$(cd "$1" && pwd)
pki=$work/pki
kubectl="$bin/kubectl --kubeconfig=$work/kubeconfig --cache-dir=$work/kubectl-cache"

for b in etcd kube-apiserver kubectl; do
  [ -x "$bin/$b" ] || { echo "$bin/$b missing: run 'make testenv-bins' first" >&2; exit 1; }
done
for tool in openssl curl; do
  command -v "$tool" >/dev/null || { echo "$tool is needed by $0" >&2; exit 1; }
done

alive() { [ -f "$work/$1.pid" ] && kill -0 "$(cat "$work/$1.pid")" 2>/dev/null; }
if alive kube-apiserver; then
  echo "already running (stop it with: make testenv-down)"
  echo "export KUBECONFIG=$work/kubeconfig"
  exit 0
fi
# stop.sh only deletes a directory that carries this marker.
touch "$work/.switchback-testenv"

# A free loopback port: ask the kernel when python3 is there, else probe
# random ports until a connect fails.
free_port() {
  if command -v python3 >/dev/null; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
    return
  fi
  local p
  while :; do
    p=$(shuf -i 20000-60000 -n 1)
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "$p"; return; fi
  done
}
client_port=$(free_port); peer_port=$(free_port); api_port=$(free_port)
while [ "$peer_port" = "$client_port" ]; do peer_port=$(free_port); done
while [ "$api_port" = "$client_port" ] || [ "$api_port" = "$peer_port" ]; do api_port=$(free_port); done

# --- PKI: CA, serving cert for 127.0.0.1, admin client cert, SA key pair.
# EC P-256 keys, like the Go helper: instant to make, accepted everywhere.
mkdir -p "$pki" && chmod 700 "$pki"
newkey() { openssl ecparam -name prime256v1 -genkey -noout -out "$pki/$1.key" 2>/dev/null; }
sign() { # name subject extensions
  openssl req -new -key "$pki/$1.key" -subj "$2" -out "$pki/$1.csr" 2>/dev/null
  openssl x509 -req -in "$pki/$1.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 7 -out "$pki/$1.crt" -extfile <(printf '%s\n' "$3") 2>/dev/null
  rm -f "$pki/$1.csr"
}
newkey ca
openssl req -x509 -new -key "$pki/ca.key" -subj "/CN=switchback-testenv-ca" -days 7 -out "$pki/ca.crt" \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null
newkey apiserver
sign apiserver "/CN=kube-apiserver" \
  "subjectAltName=IP:127.0.0.1,DNS:localhost
extendedKeyUsage=serverAuth
keyUsage=critical,digitalSignature"
newkey admin
# O=system:masters is bound to cluster-admin by the bootstrap RBAC policy.
sign admin "/O=system:masters/CN=admin" \
  "extendedKeyUsage=clientAuth
keyUsage=critical,digitalSignature"
newkey sa
openssl ec -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
chmod 600 "$pki"/*.key

t0=$(date +%s%N)
# --- etcd, with every ETCD_* variable of the caller removed from its env.
unset_etcd=()
while IFS= read -r v; do unset_etcd+=(-u "$v"); done < <(compgen -e | grep '^ETCD_' || true)
client_url=http://127.0.0.1:$client_port
peer_url=http://127.0.0.1:$peer_port
# setsid: the servers must outlive the make/shell that started them and not
# get its Ctrl-C.
setsid env "${unset_etcd[@]}" "$bin/etcd" --name=testenv --data-dir="$work/etcd-data" \
  --listen-client-urls="$client_url" --advertise-client-urls="$client_url" \
  --listen-peer-urls="$peer_url" --initial-advertise-peer-urls="$peer_url" \
  --initial-cluster="testenv=$peer_url" \
  --unsafe-no-fsync --quota-backend-bytes=$((1 << 30)) --log-level=warn \
  </dev/null >"$work/etcd.log" 2>&1 &
echo $! >"$work/etcd.pid"

# --- kube-apiserver. --endpoint-reconciler-type=none: the default reconciler
# refuses a loopback advertise address. The ServiceAccount admission plugin
# is off since no controller-manager creates default service accounts.
setsid "$bin/kube-apiserver" \
  --etcd-servers="$client_url" \
  --bind-address=127.0.0.1 --advertise-address=127.0.0.1 --secure-port="$api_port" \
  --tls-cert-file="$pki/apiserver.crt" --tls-private-key-file="$pki/apiserver.key" \
  --client-ca-file="$pki/ca.crt" \
  --authorization-mode=RBAC \
  --service-account-issuer=https://kubernetes.default.svc.cluster.local \
  --service-account-key-file="$pki/sa.pub" --service-account-signing-key-file="$pki/sa.key" \
  --service-cluster-ip-range=10.0.0.0/24 \
  --disable-admission-plugins=ServiceAccount \
  --allow-privileged=true \
  --endpoint-reconciler-type=none \
  --cert-dir="$pki" \
  </dev/null >"$work/kube-apiserver.log" 2>&1 &
echo $! >"$work/kube-apiserver.pid"

cat >"$work/kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: switchback-testenv
  cluster:
    server: https://127.0.0.1:$api_port
    certificate-authority: $pki/ca.crt
users:
- name: admin
  user:
    client-certificate: $pki/admin.crt
    client-key: $pki/admin.key
contexts:
- name: switchback-testenv
  context: {cluster: switchback-testenv, user: admin, namespace: default}
current-context: switchback-testenv
KC
chmod 600 "$work/kubeconfig"

fail() {
  echo "$1" >&2
  for p in kube-apiserver etcd; do echo "--- $p.log (tail)" >&2; tail -n 20 "$work/$p.log" >&2 || true; done
  "$here/stop.sh" "$work" --keep >/dev/null 2>&1 || true
  echo "logs kept in $work" >&2
  exit 1
}

# --- wait for /readyz (post-start hooks done, bootstrap RBAC in place).
deadline=$(($(date +%s) + 120))
until curl -fsS --max-time 2 --cacert "$pki/ca.crt" --cert "$pki/admin.crt" --key "$pki/admin.key" \
  "https://127.0.0.1:$api_port/readyz" >/dev/null 2>&1; do
  alive etcd || fail "etcd exited during start"
  alive kube-apiserver || fail "kube-apiserver exited during start"
  [ "$(date +%s)" -lt "$deadline" ] || fail "kube-apiserver not ready after 120s"
  sleep 0.1
done
ms=$((($(date +%s%N) - t0) / 1000000))
echo "kube-apiserver ready in ${ms}ms at https://127.0.0.1:$api_port"

if [ "${NO_CRDS:-0}" != 1 ]; then
  $kubectl apply -k "$root/deploy/crds" >/dev/null || fail "installing the CRDs failed"
  # kubectl wait has no -k: resolve the kustomization to names first.
  crds=$($kubectl get -k "$root/deploy/crds" -o name) || fail "listing the CRDs failed"
  # shellcheck disable=SC2086 # one name per word
  $kubectl wait --for=condition=Established --timeout=60s $crds >/dev/null ||
    fail "CRDs not Established"
  echo "CRDs of deploy/crds installed and Established"
fi

echo "kubeconfig: $work/kubeconfig"
echo "export KUBECONFIG=$work/kubeconfig"
