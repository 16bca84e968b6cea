#!/bin/sh
# Registers Synctide's Temporal namespace once the server answers (temporalio/admin-tools). The
# server is waited for, at most 60 tries 2 s apart, saying so. The API and workers wait for the
# namespace themselves too (TEMPORAL_STARTUP_WAIT_SECONDS), so a slow start is no failure.
set -eu
tries=0
until temporal operator cluster health --address "$TEMPORAL_ADDRESS" | grep -q SERVING; do
  tries=$((tries + 1))
  if [ "$tries" -ge 60 ]; then echo "gave up waiting for the Temporal frontend at $TEMPORAL_ADDRESS after $tries tries"; exit 1; fi
  echo "waiting for the Temporal frontend at $TEMPORAL_ADDRESS (try $tries/60)"
  sleep 2
done
if temporal operator namespace describe --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" >/dev/null 2>&1; then
  echo "namespace $NAMESPACE exists"
else
  temporal operator namespace create --address "$TEMPORAL_ADDRESS" -n "$NAMESPACE" --retention "$RETENTION"
  echo "namespace $NAMESPACE registered"
fi
