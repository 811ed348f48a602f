"""Zero-touch provisioning: the files each switch fetches at first boot and the OOB DHCP server that points it there."""
