"""Bare metal to booted hosts: boot identity from the plan and a user-filled MAC file, DHCP reservations, PXE/iPXE
files, Redfish BMC control and the report-in endpoint. Every module here only reads the plan."""
