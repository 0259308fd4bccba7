"""Channel settings shared by the synchronous and asyncio clients."""

import os


def read_pem(value):
    """PEM bytes from bytes, PEM text, or the path of a PEM file; None
    stays None."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str) and value.lstrip().startswith("-----BEGIN"):
        return value.encode("ascii")
    with open(os.fspath(value), "rb") as f:
        return f.read()


def check_target(target):
    if not isinstance(target, str) or not target:
        raise ValueError("target is the server's gRPC address, host:port")
    if target.startswith(("http://", "https://")):
        raise ValueError(
            f"target {target!r} is a URL; the client speaks gRPC: give "
            "host:port of the server's gRPC port (--listen, 50051 by "
            "default), with tls=True for TLS")


def channel_settings(grpc_module, target, *, tls, root_certificates,
                     private_key, certificate_chain,
                     max_receive_message_bytes, options):
    """(credentials or None, channel options): TLS when `tls` or any
    certificate is given."""
    check_target(target)
    options = list(options or ())
    if max_receive_message_bytes is not None:
        options.append(("grpc.max_receive_message_length",
                        int(max_receive_message_bytes)))
    root_certificates = read_pem(root_certificates)
    private_key = read_pem(private_key)
    certificate_chain = read_pem(certificate_chain)
    if bool(private_key) != bool(certificate_chain):
        raise ValueError("private_key and certificate_chain go together "
                         "(mutual TLS)")
    if tls or root_certificates or certificate_chain:
        return grpc_module.ssl_channel_credentials(
            root_certificates=root_certificates, private_key=private_key,
            certificate_chain=certificate_chain), options
    return None, options


def bearer_metadata(token):
    if token is None or token == "":
        return ()
    if not isinstance(token, str):
        raise TypeError("token is a str")
    return (("authorization", f"Bearer {token}"),)
