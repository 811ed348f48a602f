"""Emulate a scaled-down copy of a cluster's Ethernet compute fabric in Linux network namespaces.

One namespace per switch and per host, veth pairs named as the plan's ports, FRR (zebra, bgpd,
bfdd) started on the generated frr.conf of every switch, lldpd announcing the planned names.
`railforge.lab.checks` then asserts the fabric from the kernel and the daemons.
"""
