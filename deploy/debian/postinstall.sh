#!/bin/sh
# Creates the idemgate system user; systemd creates /var/lib/idemgate.
set -e
if ! getent group idemgate >/dev/null; then
	addgroup --system idemgate >/dev/null
fi
if ! getent passwd idemgate >/dev/null; then
	adduser --system --ingroup idemgate --home /var/lib/idemgate --no-create-home \
		--shell /usr/sbin/nologin --gecos "idemgate daemon" idemgate >/dev/null
fi
chown root:idemgate /etc/idemgate/idemgate.yaml
chmod 0640 /etc/idemgate/idemgate.yaml
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null || true
fi
exit 0
