#!/bin/sh
# Stops the daemon before its files go; the journal and state stay.
set -e
if [ -d /run/systemd/system ]; then
	systemctl stop idemgate.service >/dev/null 2>&1 || true
	systemctl disable idemgate.service >/dev/null 2>&1 || true
fi
exit 0
