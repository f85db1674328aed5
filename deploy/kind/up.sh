#!/usr/bin/env bash
# Bring up the gateway in a local kind cluster, with an example extension API server behind it.
#
#   deploy/kind/up.sh            # create or update everything; safe to run again
#
# What it does, each step idempotent:
#   1. a kind cluster (deploy/kind/cluster.yaml) unless it exists;
#   2. builds the gateway image (deploy/Dockerfile) and the example server's image
#      (deploy/kind/example/Dockerfile), tags both by content and loads them into the node;
#   3. makes the example server's serving certificate once (kept in the state directory);
#   4. installs or upgrades the chart (deploy/chart/gateway) with deploy/kind/values.yaml, which
#      registers the example's APIService in the gateway, and waits for it;
#   5. deploys the example server (deploy/kind/example/wardle-apiserver.yaml) and waits for it;
#   6. writes a kubeconfig for the gateway, checks through a port-forward that the APIService is
#      Available and its resources answer, and prints the commands to reach them.
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
APISERVICE=v1alpha1.wardle.example.com

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

# -- 5. the example extension API server ---------------------------------------------------
say "example server $EXAMPLE_NAMESPACE/$EXAMPLE_NAME"
secret_data() {  # secret_data COMPONENT KEY: a key of the release's Secret of that component
  local key=${2//./\\.}
  k -n "$NAMESPACE" get secret -l "$selector,app.kubernetes.io/component=$1" \
    -o "jsonpath={.items[0].data.$key}" | base64 --decode
}
secret_data proxy-client-certificate ca.crt >"$STATE_DIR/front-proxy-ca.crt"
[[ -s $STATE_DIR/front-proxy-ca.crt ]] || die "the release has no proxy client CA Secret"
k create namespace "$EXAMPLE_NAMESPACE" --dry-run=client -o yaml | apply
k -n "$EXAMPLE_NAMESPACE" create secret tls "$EXAMPLE_NAME-serving" \
  --cert="$STATE_DIR/wardle/tls.crt" --key="$STATE_DIR/wardle/tls.key" \
  --dry-run=client -o yaml | apply
k -n "$EXAMPLE_NAMESPACE" create configmap gateway-front-proxy-ca \
  --from-file="ca.crt=$STATE_DIR/front-proxy-ca.crt" --dry-run=client -o yaml | apply
ca_checksum=$(cksum <"$STATE_DIR/front-proxy-ca.crt" | cut -d' ' -f1)
sed -e "s|@WARDLE_IMAGE@|wardle-apiserver:$WARDLE_TAG|" \
    -e "s|@FRONT_PROXY_CA_CHECKSUM@|$ca_checksum|" \
    "$ROOT/deploy/kind/example/wardle-apiserver.yaml" | apply
k -n "$EXAMPLE_NAMESPACE" rollout status "deployment/$EXAMPLE_NAME" --timeout=5m

# -- 6. through the gateway ----------------------------------------------------------------
say "checking $APISERVICE through the gateway"
SERVICE=$(k -n "$NAMESPACE" get service -l "$selector" -o jsonpath='{.items[0].metadata.name}')
KUBECONFIG_OUT=$STATE_DIR/gateway.kubeconfig
secret_data serving-certificate ca.crt >"$STATE_DIR/gateway-ca.crt"
token=$(secret_data token-auth-file token)
[[ -n $token ]] || die "the release has no admin token Secret (auth.tokenAuthFile.existingSecret?)"
kc() { kubectl --kubeconfig "$KUBECONFIG_OUT" "$@"; }
kc config set-cluster gateway --server "https://127.0.0.1:$LOCAL_PORT" \
  --tls-server-name "$SERVICE.$NAMESPACE.svc" \
  --certificate-authority "$STATE_DIR/gateway-ca.crt" --embed-certs=true >/dev/null
kc config set-credentials gateway-admin --token "$token" >/dev/null
kc config set-context gateway --cluster gateway --user gateway-admin >/dev/null
kc config use-context gateway >/dev/null
chmod 600 "$KUBECONFIG_OUT"

# A port-forward on a free local port for the checks, stopped on exit.
k -n "$NAMESPACE" port-forward "service/$SERVICE" ":443" >"$STATE_DIR/port-forward.log" 2>&1 &
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

# The chart's registration job has put the example's APIService, and its Service (which the
# gateway checks, as kube-aggregator checks the cluster's), into the gateway.
if ! gw wait --for=condition=Available "apiservice/$APISERVICE" --timeout=180s; then
  gw get apiservice "$APISERVICE" -o yaml >&2 || true
  die "$APISERVICE did not become Available"
fi
# Discovery of the new group follows availability by a moment: retry until kubectl finds it.
for _ in $(seq 30); do
  gw get flunders --all-namespaces >/dev/null 2>&1 && break
  sleep 2
done
gw get flunders --all-namespaces >/dev/null

cat <<EOF

The gateway is up in kind cluster $CLUSTER (namespace $NAMESPACE), with the example extension
API server $EXAMPLE_NAMESPACE/$EXAMPLE_NAME registered as $APISERVICE.

Reach the example's resources through the gateway:

  kubectl --context $CONTEXT -n $NAMESPACE port-forward service/$SERVICE $LOCAL_PORT:443 &
  kubectl --kubeconfig $KUBECONFIG_OUT get flunders --all-namespaces

Tear it all down with: kind delete cluster --name $CLUSTER
EOF
