#!/usr/bin/env bash
# Bring up the gateway in a local kind cluster, with an example extension API server behind it.
#
#   deploy/kind/up.sh            # create or update everything; safe to run again
#
# What it does, each step idempotent:
#   1. a kind cluster (deploy/kind/cluster.yaml) unless it exists;
#   2. builds the gateway image (deploy/Dockerfile) and the example server's image
#      (deploy/kind/example/Dockerfile: examples/wardle on the gateway image), tags both by
#      content and loads them into the node;
#   3. makes the example server's serving certificate once (kept in the state directory);
#   4. installs or upgrades the chart (deploy/chart/gateway) with deploy/kind/values.yaml, which
#      registers the example's APIServices in the gateway, and waits for it;
#   5. writes a kubeconfig for the gateway and opens a port-forward to it;
#   6. gives the example an identity in the gateway (deploy/kind/example/
#      wardle-apiserver-identity.yaml: a ServiceAccount bound to system:auth-delegator and
#      extension-apiserver-authentication-reader) and a kubeconfig of it: the gateway's
#      Service, its CA and a token of that ServiceAccount (kept while the gateway takes it);
#   7. deploys the example server (deploy/kind/example/wardle-apiserver.yaml) with that
#      kubeconfig in a Secret, and waits for it;
#   8. checks through the port-forward that the APIServices are Available and the example's
#      resources answer, and prints the commands to reach them.
#
# Settings (environment): CLUSTER (gateway), RELEASE (gateway), NAMESPACE (gateway),
# KIND_NODE_IMAGE (kind's default node image), LOCAL_PORT (6443, for the printed commands),
# STATE_DIR (${XDG_CACHE_HOME:-$HOME/.cache}/gateway-kind/$CLUSTER).
# Needs docker (with a running engine), kind, kubectl and helm.
set -euo pipefail

# Bash alone until the tools are checked, so a missing one is reported before anything runs.
here=${BASH_SOURCE[0]%/*}
[[ $here == "${BASH_SOURCE[0]}" ]] && here=.
ROOT=$(cd "$here/../.." && pwd)
CLUSTER=${CLUSTER:-gateway}
RELEASE=${RELEASE:-gateway}
NAMESPACE=${NAMESPACE:-gateway}
KIND_NODE_IMAGE=${KIND_NODE_IMAGE:-}
LOCAL_PORT=${LOCAL_PORT:-6443}
STATE_DIR=${STATE_DIR:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/gateway-kind/$CLUSTER}
EXAMPLE_NAMESPACE=wardle
EXAMPLE_NAME=wardle-apiserver
APISERVICES=(v1beta1.wardle.example.com v1alpha1.wardle.example.com)

say() { printf '\n==> %s\n' "$*" >&2; }
die() { printf 'up.sh: %s\n' "$*" >&2; exit 1; }

missing=()
for tool in docker kind kubectl helm base64 sed; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if ((${#missing[@]})); then
  die "missing on the PATH: ${missing[*]} (needed: docker with a running engine, kind, kubectl, helm)"
fi
docker info >/dev/null 2>&1 || die "docker cannot reach a container engine (is it running?)"

CONTEXT=kind-$CLUSTER
k() { kubectl --context "$CONTEXT" "$@"; }
# Apply a manifest read from stdin (create or update, never fail on "exists").
apply() { k apply -f - >/dev/null; }

# -- 1. the cluster ------------------------------------------------------------------------
say "kind cluster $CLUSTER"
clusters=$(kind get clusters 2>/dev/null || true)
if grep -qx -- "$CLUSTER" <<<"$clusters"; then
  echo "exists" >&2
else
  create=(kind create cluster --name "$CLUSTER" --config "$ROOT/deploy/kind/cluster.yaml"
          --wait 180s)
  [[ -n $KIND_NODE_IMAGE ]] && create+=(--image "$KIND_NODE_IMAGE")
  "${create[@]}"
fi

# -- 2. images -----------------------------------------------------------------------------
# Tagged by content: a rebuilt image gets a new tag, so the chart and the example Deployment
# roll exactly when the code changed, and an unchanged one changes nothing.
content_tag() { local id; id=$(docker image inspect --format '{{.Id}}' "$1"); echo "sha-${id:7:12}"; }

say "building images"
docker build --file "$ROOT/deploy/Dockerfile" --tag gateway:kind-build "$ROOT"
GATEWAY_TAG=$(content_tag gateway:kind-build)
docker tag gateway:kind-build "gateway:$GATEWAY_TAG"
docker build --file "$ROOT/deploy/kind/example/Dockerfile" \
  --build-arg "GATEWAY_IMAGE=gateway:$GATEWAY_TAG" --tag wardle-apiserver:kind-build "$ROOT"
WARDLE_TAG=$(content_tag wardle-apiserver:kind-build)
docker tag wardle-apiserver:kind-build "wardle-apiserver:$WARDLE_TAG"
kind load docker-image --name "$CLUSTER" "gateway:$GATEWAY_TAG" "wardle-apiserver:$WARDLE_TAG"

# -- 3. the example server's certificate ---------------------------------------------------
say "certificates in $STATE_DIR"
mkdir -p "$STATE_DIR"
chmod 700 "$STATE_DIR"
if [[ ! -s $STATE_DIR/wardle/tls.crt ]]; then
  # The gateway's own `certs` commands, run from its image: a CA, then a serving certificate
  # for wardle-apiserver.wardle.svc signed by it.
  gateway_cli=(docker run --rm --user "$(id -u):$(id -g)" --volume "$STATE_DIR:/pki"
               --entrypoint gateway "gateway:$GATEWAY_TAG")
  "${gateway_cli[@]}" certs --cert-dir /pki/ca >/dev/null
  "${gateway_cli[@]}" certs serving --cert-dir /pki/ca --name "$EXAMPLE_NAME" \
    --namespace "$EXAMPLE_NAMESPACE" --out /pki/wardle
fi
CA_BUNDLE=$(base64 <"$STATE_DIR/wardle/ca.crt" | tr -d '\n')

# -- 4. the gateway ------------------------------------------------------------------------
say "helm release $RELEASE in namespace $NAMESPACE"
sed "s|@CA_BUNDLE@|$CA_BUNDLE|" "$ROOT/deploy/kind/values.yaml" >"$STATE_DIR/values.yaml"
helm upgrade --install "$RELEASE" "$ROOT/deploy/chart/gateway" \
  --kube-context "$CONTEXT" --namespace "$NAMESPACE" --create-namespace \
  --values "$STATE_DIR/values.yaml" --set "image.tag=$GATEWAY_TAG" \
  --wait --timeout 10m
selector="app.kubernetes.io/instance=$RELEASE"
DEPLOYMENT=$(k -n "$NAMESPACE" get deployment -l "$selector" -o jsonpath='{.items[0].metadata.name}')
k -n "$NAMESPACE" rollout status "deployment/$DEPLOYMENT" --timeout=5m

# -- 5. the gateway's kubeconfig and a port-forward ----------------------------------------
say "kubeconfig and port-forward for the gateway"
secret_data() {  # secret_data COMPONENT KEY: a key of the release's Secret of that component
  local key=${2//./\\.}
  k -n "$NAMESPACE" get secret -l "$selector,app.kubernetes.io/component=$1" \
    -o "jsonpath={.items[0].data.$key}" | base64 --decode
}
SERVICE=$(k -n "$NAMESPACE" get service -l "$selector" -o jsonpath='{.items[0].metadata.name}')
SERVICE_PORT=$(k -n "$NAMESPACE" get service "$SERVICE" \
  -o jsonpath='{.spec.ports[?(@.name=="https")].port}')
SERVER_NAME=$SERVICE.$NAMESPACE.svc
KUBECONFIG_OUT=$STATE_DIR/gateway.kubeconfig
secret_data serving-certificate ca.crt >"$STATE_DIR/gateway-ca.crt"
token=$(secret_data token-auth-file token)
[[ -n $token ]] || die "the release has no admin token Secret (auth.tokenAuthFile.existingSecret?)"
kc() { kubectl --kubeconfig "$KUBECONFIG_OUT" "$@"; }
kc config set-cluster gateway --server "https://127.0.0.1:$LOCAL_PORT" \
  --tls-server-name "$SERVER_NAME" \
  --certificate-authority "$STATE_DIR/gateway-ca.crt" --embed-certs=true >/dev/null
kc config set-credentials gateway-admin --token "$token" >/dev/null
kc config set-context gateway --cluster gateway --user gateway-admin >/dev/null
kc config use-context gateway >/dev/null
chmod 600 "$KUBECONFIG_OUT"

# A port-forward on a free local port for the steps below, stopped on exit.
k -n "$NAMESPACE" port-forward "service/$SERVICE" ":$SERVICE_PORT" \
  >"$STATE_DIR/port-forward.log" 2>&1 &
forward=$!
trap 'kill "$forward" 2>/dev/null || true' EXIT
port=
for _ in $(seq 100); do
  port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$STATE_DIR/port-forward.log")
  [[ -n $port ]] && break
  kill -0 "$forward" 2>/dev/null || die "port-forward failed: $(cat "$STATE_DIR/port-forward.log")"
  sleep 0.2
done
[[ -n $port ]] || die "port-forward did not start: $(cat "$STATE_DIR/port-forward.log")"
gw() { kc --server "https://127.0.0.1:$port" "$@"; }

# -- 6. the example's identity in the gateway ----------------------------------------------
# The example delegates authentication, authorization and admission to the gateway, as kube's
# sample-apiserver does to kube-apiserver, so it needs an identity there. The chart's
# registration job has created the namespace wardle in the gateway (for the APIServices'
# Service); the ServiceAccount and its bindings go in beside it.
say "identity of $EXAMPLE_NAMESPACE/$EXAMPLE_NAME in the gateway"
gw apply -f "$ROOT/deploy/kind/example/wardle-apiserver-identity.yaml" >/dev/null
# Its token: a year long, kept in the state directory, minted again when it is half that old
# or when the gateway no longer takes it (a new cluster, a new signing key).
EXAMPLE_USER=system:serviceaccount:$EXAMPLE_NAMESPACE:$EXAMPLE_NAME
EXAMPLE_TOKEN=$STATE_DIR/wardle/token
EXAMPLE_KUBECONFIG=$STATE_DIR/wardle/kubeconfig
example_kubeconfig() {  # the example's kubeconfig: the gateway's Service, its CA, the token
  local kx=(kubectl --kubeconfig "$EXAMPLE_KUBECONFIG")
  rm -f "$EXAMPLE_KUBECONFIG"
  "${kx[@]}" config set-cluster gateway --server "https://$SERVER_NAME:$SERVICE_PORT" \
    --certificate-authority "$STATE_DIR/gateway-ca.crt" --embed-certs=true >/dev/null
  "${kx[@]}" config set-credentials "$EXAMPLE_NAME" --token "$(<"$EXAMPLE_TOKEN")" >/dev/null
  "${kx[@]}" config set-context gateway --cluster gateway --user "$EXAMPLE_NAME" >/dev/null
  "${kx[@]}" config use-context gateway >/dev/null
  chmod 600 "$EXAMPLE_KUBECONFIG"
}
example_identity() {  # whom the gateway takes the example's kubeconfig for (via the forward)
  kubectl --kubeconfig "$EXAMPLE_KUBECONFIG" --server "https://127.0.0.1:$port" \
    --tls-server-name "$SERVER_NAME" auth whoami -o jsonpath='{.status.userInfo.username}' \
    2>/dev/null || true
}
fresh_token() { [[ -s $EXAMPLE_TOKEN && -z $(find "$EXAMPLE_TOKEN" -mtime +180) ]]; }
if fresh_token; then
  example_kubeconfig
  [[ $(example_identity) == "$EXAMPLE_USER" ]] || rm -f "$EXAMPLE_TOKEN"
fi
if ! fresh_token; then
  (umask 077 && gw -n "$EXAMPLE_NAMESPACE" create token "$EXAMPLE_NAME" --duration=8760h \
    >"$EXAMPLE_TOKEN")
  example_kubeconfig
  identity=$(example_identity)
  [[ $identity == "$EXAMPLE_USER" ]] ||
    die "the gateway takes the example's new token for '$identity', not $EXAMPLE_USER"
fi

# -- 7. the example extension API server ---------------------------------------------------
say "example server $EXAMPLE_NAMESPACE/$EXAMPLE_NAME"
k create namespace "$EXAMPLE_NAMESPACE" --dry-run=client -o yaml | apply
k -n "$EXAMPLE_NAMESPACE" create secret tls "$EXAMPLE_NAME-serving" \
  --cert="$STATE_DIR/wardle/tls.crt" --key="$STATE_DIR/wardle/tls.key" \
  --dry-run=client -o yaml | apply
k -n "$EXAMPLE_NAMESPACE" create secret generic "$EXAMPLE_NAME-kubeconfig" \
  --from-file="kubeconfig=$EXAMPLE_KUBECONFIG" --dry-run=client -o yaml | apply
kubeconfig_checksum=$(cksum <"$EXAMPLE_KUBECONFIG" | cut -d' ' -f1)
sed -e "s|@WARDLE_IMAGE@|wardle-apiserver:$WARDLE_TAG|" \
    -e "s|@KUBECONFIG_CHECKSUM@|$kubeconfig_checksum|" \
    "$ROOT/deploy/kind/example/wardle-apiserver.yaml" | apply
k -n "$EXAMPLE_NAMESPACE" rollout status "deployment/$EXAMPLE_NAME" --timeout=5m

# -- 8. through the gateway ----------------------------------------------------------------
say "checking ${APISERVICES[*]} through the gateway"
# The chart's registration job has put the example's APIServices, and its Service (which the
# gateway checks, as kube-aggregator checks the cluster's), into the gateway.
for apiservice in "${APISERVICES[@]}"; do
  if ! gw wait --for=condition=Available "apiservice/$apiservice" --timeout=180s; then
    gw get apiservice "$apiservice" -o yaml >&2 || true
    die "$apiservice did not become Available"
  fi
done
# Discovery of the new group follows availability by a moment: retry until kubectl finds it.
for _ in $(seq 30); do
  gw get flunders --all-namespaces >/dev/null 2>&1 && break
  sleep 2
done
gw get flunders --all-namespaces >/dev/null

cat <<EOF

The gateway is up in kind cluster $CLUSTER (namespace $NAMESPACE), with the example extension
API server $EXAMPLE_NAMESPACE/$EXAMPLE_NAME (examples/wardle) registered as ${APISERVICES[*]}.

Reach the example's resources through the gateway:

  kubectl --context $CONTEXT -n $NAMESPACE port-forward service/$SERVICE $LOCAL_PORT:$SERVICE_PORT &
  kubectl --kubeconfig $KUBECONFIG_OUT get flunders --all-namespaces

Tear it all down with: kind delete cluster --name $CLUSTER
EOF
