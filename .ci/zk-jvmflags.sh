#!/usr/bin/env bash
# zk-jvmflags.sh LOG: prints the JVMFLAGS that give a ZooKeeper started by Debian's zkServer.sh a
# log file, LOG. Debian's zkEnv.sh puts no SLF4J binding on the class path (the server logs
# nothing) and overrides ZOO_LOG_DIR; slf4j-simple (package libslf4j-java, a dependency of
# libzookeeper-java) on a class path given in JVMFLAGS (the last -cp wins) writes to LOG.
# Used by .ci/services.sh (the shared server) and .ci/zk-ensemble.sh (its three).
printf '%s' "-cp /etc/zookeeper/conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar -Dorg.slf4j.simpleLogger.logFile=$1 -Dorg.slf4j.simpleLogger.showDateTime=true -Dorg.slf4j.simpleLogger.dateTimeFormat=yyyy-MM-dd'T'HH:mm:ss.SSS"
