//! The Kafka sink (`flows: {kafka: {brokers: ..., topic: flows}}`,
//! `--kafka`): one producer per run, with a topic for the flow records and
//! one each for the statistics, the alarms and the call records
//! (`../INTERFACES`: `flows`, `stats`, `alarms`, `calls`, after the
//! prefix). Values are the JSON objects of the files' lines; the key is
//! the record's `flow_id`, the call's `call_id`, the alarm's `alarm_id`.
//!
//! librdkafka (the `rdkafka` crate, its bundled source) batches,
//! compresses and retries in threads of its own; producing only puts a
//! message in its queue. The queue is bounded (`queue` messages): a message
//! that finds it full is dropped and counted, so a dead or slow broker
//! never holds the capture back. A message the brokers do not acknowledge
//! within `timeout` is counted as failed; so is one still waiting at the
//! end of the run, `timeout` after the last record. The producer is
//! idempotent and waits for every in-sync replica (`acks=all`): a retry
//! never writes a record twice.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::DeliveryResult;
use rdkafka::producer::{BaseRecord, Producer, ProducerContext, PurgeConfig, ThreadedProducer};
use sluice_export::JsonlEncoder;
use sluice_export::schema::Record;
use sluice_flow::FlowTable;

use crate::config::{ConfigError, KafkaConfig};
use crate::listen::FlowListener;
use crate::listen::export::ExportReport;
use crate::publish::Published;
use crate::threads::Waits;

/// The topics of a run, in the order of [`Kafka::topic`]'s index.
pub(crate) const TOPICS: [&str; 4] = ["flows", "stats", "alarms", "calls"];

/// Index of a topic in [`TOPICS`].
#[derive(Clone, Copy)]
pub(crate) enum Topic {
    Flows = 0,
    Stats = 1,
    Alarms = 2,
    Calls = 3,
}

/// What one topic's messages became.
#[derive(Default)]
struct Counters {
    /// Handed to the producer.
    produced: AtomicU64,
    /// Acknowledged by the brokers, and their value bytes.
    delivered: AtomicU64,
    bytes: AtomicU64,
    /// Not acknowledged: refused, timed out, or still waiting at the end.
    failed: AtomicU64,
    /// Dropped because the producer's queue was full.
    queue_full: AtomicU64,
    last_error: Mutex<Option<String>>,
}

impl Counters {
    fn error(&self, e: &KafkaError) {
        *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.to_string());
    }
}

/// Counts deliveries per topic, and puts the counters where `/metrics`
/// reads them each time librdkafka reports its statistics (every second).
struct Delivery {
    topics: Vec<Arc<Counters>>,
    /// The last error of the client itself (a broker down, refused
    /// credentials), which explains messages that time out.
    client_error: Mutex<Option<String>>,
    names: Vec<String>,
    published: Published,
    last_publish: Mutex<Instant>,
}

impl Delivery {
    fn publish(&self) {
        for (name, c) in self.names.iter().zip(&self.topics) {
            let listener = format!("kafka:{name}");
            let mut p = self.published.lock();
            p.drops.insert(
                (listener.clone(), "queue_full".into()),
                c.queue_full.load(Ordering::Relaxed),
            );
            p.drops
                .insert((listener, "failed".into()), c.failed.load(Ordering::Relaxed));
        }
    }
}

impl ClientContext for Delivery {
    fn error(&self, error: KafkaError, reason: &str) {
        let mut last = self.client_error.lock().unwrap_or_else(|p| p.into_inner());
        // "All brokers down" follows the error that brought them down
        // (refused credentials, a certificate): keep that one.
        if last.is_none() || error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown) {
            *last = Some(format!("{error}: {reason}"));
        }
    }

    fn stats_raw(&self, _statistics: &[u8]) {
        let mut last = self.last_publish.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() >= Duration::from_millis(900) {
            *last = Instant::now();
            self.publish();
        }
    }
}

impl ProducerContext for Delivery {
    type DeliveryOpaque = usize;

    fn delivery(&self, result: &DeliveryResult<'_>, topic: usize) {
        let c = &self.topics[topic];
        match result {
            Ok(message) => {
                c.delivered.fetch_add(1, Ordering::Relaxed);
                c.bytes.fetch_add(message.payload_len() as u64, Ordering::Relaxed);
            }
            Err((e, _)) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                // Purged at the end of the run: the reason is the client's
                // error, not the purge.
                let purged = matches!(
                    e,
                    KafkaError::MessageProduction(RDKafkaErrorCode::PurgeQueue | RDKafkaErrorCode::PurgeInflight)
                );
                if !purged {
                    c.error(e);
                }
            }
        }
    }
}

/// The run's producer.
pub(crate) struct Kafka {
    producer: ThreadedProducer<Delivery>,
    topics: Vec<String>,
    brokers: String,
    timeout: Duration,
}

/// A place to send messages of one topic; cheap to clone.
#[derive(Clone)]
pub(crate) struct KafkaTopic {
    producer: ThreadedProducer<Delivery>,
    topic: Arc<str>,
    index: usize,
}

impl Kafka {
    /// Configures the producer. librdkafka connects in the background: a
    /// broker that is down is not an error here, its messages fail later
    /// and are counted.
    pub(crate) fn start(config: &KafkaConfig, published: Published) -> Result<Kafka, ConfigError> {
        let bad = |key: &str, message: String| ConfigError::Value {
            key: format!("flows.kafka.{key}"),
            message,
        };
        if config.brokers.trim().is_empty() {
            return Err(bad(
                "brokers",
                "give HOST:PORT[,HOST:PORT...] (the Kafka port is 9092)".into(),
            ));
        }
        if !["lz4", "zstd", "gzip", "snappy", "none"].contains(&config.compression.as_str()) {
            return Err(bad(
                "compression",
                format!("{:?}: one of lz4, zstd, gzip, snappy, none", config.compression),
            ));
        }
        let mut c = ClientConfig::new();
        let timeout_ms = config.timeout.as_millis().clamp(1, i32::MAX as u128).to_string();
        c.set("bootstrap.servers", &config.brokers)
            .set("acks", "all")
            .set("enable.idempotence", "true")
            .set("compression.type", &config.compression)
            .set("linger.ms", "20")
            .set("batch.size", "1000000")
            .set("queue.buffering.max.messages", config.queue.max(1).to_string())
            .set("queue.buffering.max.kbytes", "1048576")
            .set("message.timeout.ms", &timeout_ms)
            .set("statistics.interval.ms", "1000")
            .set("client.id", "sluice");
        let password = std::env::var("SLUICE_KAFKA_PASSWORD").ok().or(config.password.clone());
        let protocol = match (config.tls, config.user.is_some()) {
            (false, false) => "plaintext",
            (true, false) => "ssl",
            (false, true) => "sasl_plaintext",
            (true, true) => "sasl_ssl",
        };
        c.set("security.protocol", protocol);
        if let Some(ca) = &config.ca {
            if !ca.is_file() {
                return Err(bad(
                    "ca",
                    format!("{}: no such file (a PEM file of CA certificates)", ca.display()),
                ));
            }
            c.set("ssl.ca.location", ca.display().to_string());
        }
        if let Some(user) = &config.user {
            let Some(password) = password else {
                return Err(bad(
                    "user",
                    "a SASL user needs a password: set SLUICE_KAFKA_PASSWORD (or flows.kafka.password)".into(),
                ));
            };
            c.set("sasl.mechanism", "PLAIN")
                .set("sasl.username", user)
                .set("sasl.password", password);
        }
        for (key, value) in &config.options {
            c.set(key, value);
        }
        let topics: Vec<String> = TOPICS
            .iter()
            .enumerate()
            .map(|(i, t)| match i {
                0 => format!("{}{}", config.topic_prefix, config.topic),
                _ => format!("{}{t}", config.topic_prefix),
            })
            .collect();
        let delivery = Delivery {
            topics: TOPICS.iter().map(|_| Arc::new(Counters::default())).collect(),
            client_error: Mutex::new(None),
            names: topics.clone(),
            published,
            last_publish: Mutex::new(Instant::now()),
        };
        let producer: ThreadedProducer<Delivery> = c.create_with_context(delivery).map_err(|e| ConfigError::Value {
            key: "flows.kafka".into(),
            message: e.to_string(),
        })?;
        Ok(Kafka {
            producer,
            topics,
            brokers: config.brokers.clone(),
            timeout: config.timeout,
        })
    }

    pub(crate) fn topic(&self, topic: Topic) -> KafkaTopic {
        let index = topic as usize;
        KafkaTopic {
            producer: self.producer.clone(),
            topic: self.topics[index].as_str().into(),
            index,
        }
    }

    /// A worker's part: it sends each record as it ends.
    pub(crate) fn worker_part(&self) -> KafkaWorker {
        KafkaWorker {
            topic: self.topic(Topic::Flows),
            encoder: JsonlEncoder::default(),
            value: Vec::with_capacity(4096),
        }
    }

    /// Waits up to the timeout for the messages still queued, counts those
    /// left as failed, and reports each topic that got messages (the flows
    /// topic always).
    pub(crate) fn finish(self) -> Vec<ExportReport> {
        if self.producer.flush(self.timeout).is_err() {
            // What is left will not be delivered: purged, each message's
            // delivery reports the failure.
            self.producer.purge(PurgeConfig::default().queue().inflight());
            let _ = self.producer.flush(Duration::from_secs(1));
        }
        let context = self.producer.context();
        context.publish();
        let mut reports = Vec::new();
        for (i, (name, c)) in self.topics.iter().zip(&context.topics).enumerate() {
            let produced = c.produced.load(Ordering::Relaxed);
            let queue_full = c.queue_full.load(Ordering::Relaxed);
            if i != 0 && produced + queue_full == 0 {
                continue;
            }
            let delivered = c.delivered.load(Ordering::Relaxed);
            // Messages whose delivery never reported (none, after the
            // purge; but never lose count of one).
            let failed = c.failed.load(Ordering::Relaxed).max(produced.saturating_sub(delivered));
            let mut last_error = c.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if failed > 0 && last_error.is_none() {
                let why = context.client_error.lock().unwrap_or_else(|p| p.into_inner()).clone();
                last_error = Some(format!(
                    "not acknowledged within {:?}: {}",
                    self.timeout,
                    why.as_deref().unwrap_or("no broker answered")
                ));
            }
            let mut counters = BTreeMap::new();
            counters.insert("produced", produced);
            reports.push(ExportReport {
                sink: "kafka",
                destination: format!("{}/{name}", self.brokers),
                records: delivered,
                dropped_queue_full: queue_full,
                failed,
                messages: delivered,
                bytes: c.bytes.load(Ordering::Relaxed),
                counters,
                last_error,
            });
        }
        reports
    }
}

impl KafkaTopic {
    /// Queues one message; never waits. A full queue, or any other refusal,
    /// is counted.
    pub(crate) fn send(&self, key: Option<&[u8]>, value: &[u8]) {
        let mut record = BaseRecord::with_opaque_to(&self.topic, self.index).payload(value);
        if let Some(key) = key {
            record = record.key(key);
        }
        let c = &self.producer.context().topics[self.index];
        match self.producer.send(record) {
            Ok(()) => {
                c.produced.fetch_add(1, Ordering::Relaxed);
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                c.queue_full.fetch_add(1, Ordering::Relaxed);
            }
            Err((e, _)) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                c.error(&e);
            }
        }
    }

    /// Sends a JSON line (without its newline) keyed by the string value of
    /// its field `key_field`, when it has one.
    pub(crate) fn send_line(&self, key_field: &str, line: &[u8]) {
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let key = serde_json::from_slice::<serde_json::Value>(line)
            .ok()
            .and_then(|v| v.get(key_field).and_then(|k| k.as_str()).map(str::to_owned));
        self.send(key.as_deref().map(str::as_bytes), line);
    }
}

/// A worker's flow records, each a message keyed by its `flow_id`.
pub(crate) struct KafkaWorker {
    topic: KafkaTopic,
    encoder: JsonlEncoder,
    value: Vec<u8>,
}

impl FlowListener for KafkaWorker {
    fn record(&mut self, record: &Record, _waits: &mut Waits) {
        self.value.clear();
        self.encoder.encode(record, &mut self.value);
        if self.value.last() == Some(&b'\n') {
            self.value.pop();
        }
        // `{"flow_id":"` and 16 hex digits start every record.
        const START: &[u8] = b"{\"flow_id\":\"";
        let key = self
            .value
            .starts_with(START)
            .then(|| &self.value[START.len()..START.len() + 16]);
        self.topic.send(key, &self.value);
    }

    fn finish(&mut self, _table: &mut FlowTable<sluice_classify::FlowClass>, _waits: &mut Waits) {}
}

/// Writes what it is given and sends each complete line to a topic, keyed
/// by a field of the line: the call table's `calls.jsonl`.
pub(crate) struct Tee<W> {
    inner: W,
    topic: KafkaTopic,
    key_field: &'static str,
    line: Vec<u8>,
}

impl<W> Tee<W> {
    pub(crate) fn new(inner: W, topic: KafkaTopic, key_field: &'static str) -> Tee<W> {
        Tee {
            inner,
            topic,
            key_field,
            line: Vec::new(),
        }
    }
}

impl<W: std::io::Write> std::io::Write for Tee<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        let mut rest = &buf[..n];
        while let Some(end) = rest.iter().position(|&b| b == b'\n') {
            self.line.extend_from_slice(&rest[..end]);
            self.topic.send_line(self.key_field, &self.line);
            self.line.clear();
            rest = &rest[end + 1..];
        }
        self.line.extend_from_slice(rest);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
