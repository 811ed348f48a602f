"""Observed versus planned cabling: LLDP neighbour tables (lldpd JSON, SONiC `show lldp table`) and
InfiniBand `ibnetdiscover` output, compared cable by cable with the plan."""
