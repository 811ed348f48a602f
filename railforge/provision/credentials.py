"""Switch credentials for first boot, from the user: a YAML file kept outside the build (plain, or decrypted
from Ansible Vault on the fly: `--credentials -` reads stdin) or the environment. Never from the plan.

    admin_password_hash: "$6$..."        # crypt(3) hash (mkpasswd -m sha-512); a plain password is refused
    ssh_authorized_keys: ["ssh-ed25519 AAAA... ops@example"]
    bgp_password: "..."                  # optional: MD5/TCP-AO-less BGP session password on every peer group

Environment: RAILFORGE_ADMIN_PASSWORD_HASH, RAILFORGE_SSH_AUTHORIZED_KEYS (one key per line),
RAILFORGE_BGP_PASSWORD. A value given in the file wins over the environment.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field

import yaml

from railforge.inputs import InputError, MiB, read_text
from railforge.spec import yamlsafe

ENV = {"admin_password_hash": "RAILFORGE_ADMIN_PASSWORD_HASH",
       "ssh_authorized_keys": "RAILFORGE_SSH_AUTHORIZED_KEYS", "bgp_password": "RAILFORGE_BGP_PASSWORD"}
_CRYPT = re.compile(r"\$(1|5|6|y|2[abxy]?|gy|7)\$[./0-9A-Za-z$=,]{8,}")
_KEY = re.compile(r"(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp\d+|sk-(ssh-ed25519|ecdsa-sha2-nistp256)@openssh\.com) "
                  r"[A-Za-z0-9+/=]{16,}( [\x21-\x7e ]*)?")
_BGP = re.compile(r"[\x21-\x7e]{1,80}")


class CredentialError(ValueError):
    pass


@dataclass(slots=True)
class Credentials:
    admin_password_hash: str | None = None
    ssh_authorized_keys: list[str] = field(default_factory=list)
    bgp_password: str | None = None

    @property
    def any(self) -> bool:
        return bool(self.admin_password_hash or self.ssh_authorized_keys or self.bgp_password)

    def secrets(self) -> list[str]:
        return [s for s in (self.admin_password_hash, self.bgp_password, *self.ssh_authorized_keys) if s]


MAX_BYTES = 1 * MiB


def _from_file(source: str) -> dict:
    where = "stdin" if source == "-" else source
    try:
        text = sys.stdin.read(MAX_BYTES + 1) if source == "-" else read_text(source, MAX_BYTES)
        if len(text) > MAX_BYTES:
            raise CredentialError(f"--credentials {where}: over {MAX_BYTES:,} characters")
        data = yamlsafe.load(text)[0] or {}
    except InputError as exc:
        raise CredentialError(f"--credentials {exc}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise CredentialError(f"--credentials {where}: cannot read ({exc.__class__.__name__})") from None
    if not isinstance(data, dict):
        raise CredentialError(f"--credentials {where}: want a mapping with {', '.join(ENV)}")
    unknown = sorted(set(data) - set(ENV))
    if unknown:
        raise CredentialError(f"--credentials {where}: unknown keys {', '.join(unknown)}; known: {', '.join(ENV)}")
    return data


def load_credentials(source: str | None, environ: dict[str, str] | None = None) -> Credentials:
    env = os.environ if environ is None else environ
    data = _from_file(source) if source else {}
    where = f"--credentials {'stdin' if source == '-' else source}" if source else "environment"
    for key, var in ENV.items():
        if key not in data and env.get(var):
            data[key] = env[var]
            where = f"{where} / {var}" if source else var
    pw = data.get("admin_password_hash")
    if pw is not None and (not isinstance(pw, str) or not _CRYPT.fullmatch(pw)):
        raise CredentialError(f"{where}: admin_password_hash must be a crypt(3) hash such as $6$<salt>$<hash> "
                              "(make one with `mkpasswd -m sha-512`); a plain password is refused")
    keys = data.get("ssh_authorized_keys") or []
    if isinstance(keys, str):
        keys = [k for k in keys.splitlines() if k.strip()]
    if not isinstance(keys, list):
        raise CredentialError(f"{where}: ssh_authorized_keys must be a list of OpenSSH public keys")
    for i, k in enumerate(keys):
        if not isinstance(k, str) or not _KEY.fullmatch(k.strip()):
            raise CredentialError(f"{where}: ssh_authorized_keys[{i}] is not one OpenSSH public key line "
                                  "(`ssh-ed25519 AAAA... comment`)")
    bgp = data.get("bgp_password")
    if bgp is not None and (not isinstance(bgp, str) or not _BGP.fullmatch(bgp)):
        raise CredentialError(f"{where}: bgp_password must be 1-80 printable characters without spaces")
    return Credentials(pw, [k.strip() for k in keys], bgp)
