"""What switch ZTP (`railforge/ztp/`) and host PXE boot (`railforge/baremetal/`) share: the files an HTTP server
hands out (`served`), the DHCP options and subnet ids of the Kea configuration (`dhcp`), the credentials both put
on first boot (`credentials`) and the MAC form both record (`macs`). Both packages import this one, neither the
other's internals, so there is no cycle: `ztp` joins host reservations through `baremetal.kea`, `baremetal` never
imports `ztp`."""
