"""Summary table of railforge node validation results."""

NO_RESULT = "no result: the node was unreachable or failed before the checks"


def node_validate_summary(hosts, hostvars):
    """Rows of (node, check, message) for every failure of every host, and the counts."""
    rows = []
    for host in hosts:
        result = hostvars[host].get("node_validate_result")
        if not result or "failures" not in result:
            rows.append((host, "run", NO_RESULT))
            continue
        rows.extend((host, failure["check"], failure["message"]) for failure in result["failures"])
    width = max([len("NODE")] + [len(row[0]) for row in rows]) + 2
    lines = [f"{'NODE':<{width}}{'CHECK':<16}PROBLEM"]
    lines += [f"{node:<{width}}{check:<16}{message}" for node, check, message in rows]
    failed_nodes = sorted({row[0] for row in rows})
    return {"lines": lines, "failures": len(rows), "failed_nodes": failed_nodes, "nodes": len(hosts)}


class FilterModule:
    def filters(self):
        return {"node_validate_summary": node_validate_summary}
