"""What railforge knows about each switch operating system (SONiC platform port maps live here too)."""
