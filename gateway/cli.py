"""The ``gateway`` command: ``serve``, ``certs`` (and ``certs serving``), ``version``.

A bad flag prints one line naming it and exits 2; a gateway that cannot start (unusable
state.db, port in use, broken certificates) prints one line and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import NoReturn

from gateway.options import OptionsError, ServeOptions, add_serve_flags
from gateway.version import git_version


class _Parser(argparse.ArgumentParser):
    """argparse, but an error is one line (no usage dump), exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="gateway", description="An aggregating API gateway that speaks the "
                     "Kubernetes API.")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    serve = commands.add_parser("serve", help="run the gateway")
    add_serve_flags(serve)
    serve.set_defaults(func=_serve)

    certs = commands.add_parser("certs", help="create the development PKI and admin.kubeconfig")
    certs.add_argument("--cert-dir", default="certs", help="output directory (default certs)")
    certs.add_argument("--tls-san", action="append", default=[], help="extra serving SAN")
    certs.add_argument("--server", default="https://127.0.0.1:6443",
                       help="server URL for admin.kubeconfig")
    certs.set_defaults(func=_certs)
    certs_commands = certs.add_subparsers(dest="certs_command", parser_class=_Parser)
    serving = certs_commands.add_parser(
        "serving", help="mint a serving certificate for a backend <name>.<namespace>.svc"
    )
    serving.add_argument("--name", required=True, help="the backend Service's name")
    serving.add_argument("--namespace", required=True, help="the backend Service's namespace")
    serving.add_argument("--out", required=True, help="directory for tls.crt, tls.key, ca.crt")
    serving.add_argument("--cert-dir", default=argparse.SUPPRESS,
                         help="where the cluster CA is (default certs)")
    serving.set_defaults(func=_certs_serving)

    version = commands.add_parser("version", help="print the version")
    version.set_defaults(func=lambda args: print(git_version()) or 0)
    return parser


def _fail(prog: str, message: str, code: int) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


def _serve(args: argparse.Namespace) -> int:
    try:
        options = ServeOptions.from_args(args)
    except OptionsError as err:
        return _fail("gateway serve", str(err), 2)

    from gateway.app.run import StartupError, serve
    from gateway.logs import configure_logging

    configure_logging(options.log_format, options.verbosity)
    _use_uvloop()
    try:
        asyncio.run(serve(options))
    except StartupError as err:
        return _fail("gateway serve", str(err), 1)
    except KeyboardInterrupt:
        pass
    return 0


def _use_uvloop() -> None:
    """uvloop, when the `fast` extra installed it, makes the event loop several times faster."""
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def _certs(args: argparse.Namespace) -> int:
    from gateway import pki

    try:
        dev = pki.ensure_dev_pki(Path(args.cert_dir), sans=args.tls_san, server_url=args.server)
    except pki.PKIError as err:
        return _fail("gateway certs", str(err), 1)
    print(f"development PKI in {dev.cert_dir}; kubeconfig: {dev.kubeconfig}")
    return 0


def _certs_serving(args: argparse.Namespace) -> int:
    from gateway import pki

    try:
        cert, key, ca = pki.mint_serving_cert(
            Path(args.cert_dir), name=args.name, namespace=args.namespace, out_dir=Path(args.out)
        )
    except pki.PKIError as err:
        return _fail("gateway certs serving", str(err), 1)
    print(f"wrote {cert}, {key} and {ca}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
