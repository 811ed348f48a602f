"""Resource options for a component's children.

Pulumi does not pass a component's depends_on to its children, so the engine would create them before the
component's dependencies are ready; every component hands its dependencies down explicitly.
"""

from __future__ import annotations

import pulumi


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None, *extra) -> pulumi.ResourceOptions:
    inherited = list(opts.depends_on or []) if opts is not None else []
    return pulumi.ResourceOptions(parent=parent, depends_on=[*inherited, *extra])
