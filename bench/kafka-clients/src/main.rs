//! Produces the lines of a file (flow records from `flows.jsonl`) as
//! messages to a local Kafka broker with each client in turn, lz4 batches
//! and acknowledgement by the broker, and prints a Markdown row per client:
//! messages a second and CPU microseconds a message of this process.
//!
//! usage: kafka-clients BROKER FILE [MESSAGES]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};
use rskafka::client::ClientBuilder;
use rskafka::client::partition::{Compression, UnknownTopicHandling};
use rskafka::client::producer::BatchProducerBuilder;
use rskafka::client::producer::aggregator::RecordAggregator;
use rskafka::record::Record;

/// CPU seconds (user + system) this process has used.
fn cpu() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage fills the struct it is given.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(usage.ru_utime) + t(usage.ru_stime)
}

fn row(client: &str, n: usize, wall: Duration, cpu: f64) {
    println!(
        "| {client} | {n} | {:.2} | {:.0} | {:.2} |",
        wall.as_secs_f64(),
        n as f64 / wall.as_secs_f64(),
        cpu / n as f64 * 1e6
    );
}

/// `RDKAFKA_OPTIONS=key=value,key=value` adds librdkafka properties.
fn with_rdkafka(broker: &str, lines: &[Vec<u8>]) {
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", broker)
        .set("acks", "all")
        .set("enable.idempotence", "true")
        .set("compression.type", "lz4")
        .set("linger.ms", "20")
        .set("batch.size", "1000000");
    let extra = std::env::var("RDKAFKA_OPTIONS").unwrap_or_default();
    for option in extra.split(',').filter(|o| !o.is_empty()) {
        let (key, value) = option.split_once('=').expect("key=value");
        config.set(key, value);
    }
    let producer: ThreadedProducer<DefaultProducerContext> = config.create().expect("a producer");
    let (start, cpu0) = (Instant::now(), cpu());
    for line in lines {
        let mut record = BaseRecord::<(), [u8]>::to("bench-rdkafka").payload(line.as_slice());
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), back)) => {
                    record = back;
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err((e, _)) => panic!("{e}"),
            }
        }
    }
    producer.flush(Duration::from_secs(120)).expect("all delivered");
    let name = format!("rdkafka 0.39 (librdkafka 2.12) {extra}");
    row(name.trim(), lines.len(), start.elapsed(), cpu() - cpu0);
}

async fn with_rskafka(broker: &str, lines: &[Vec<u8>]) {
    let client = ClientBuilder::new(vec![broker.to_string()]).build().await.expect("a client");
    let topic = "bench-rskafka";
    let controller = client.controller_client().expect("a controller");
    let _ = controller.create_topic(topic, 1, 1, 5_000).await;
    let partition = client
        .partition_client(topic, 0, UnknownTopicHandling::Retry)
        .await
        .expect("the partition");
    let producer = BatchProducerBuilder::new(Arc::new(partition))
        .with_linger(Duration::from_millis(20))
        .with_compression(Compression::Lz4)
        .build(RecordAggregator::new(1_000_000));
    let (start, cpu0) = (Instant::now(), cpu());
    let producer = &producer;
    futures::stream::iter(lines)
        .map(|line| async move {
            producer
                .produce(Record {
                    key: None,
                    value: Some(line.clone()),
                    headers: BTreeMap::new(),
                    timestamp: chrono::Utc::now(),
                })
                .await
                .expect("produced")
        })
        .buffer_unordered(100_000)
        .for_each(|_| async {})
        .await;
    row("rskafka 0.6", lines.len(), start.elapsed(), cpu() - cpu0);
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (broker, file) = (&args[1], &args[2]);
    let want: usize = args.get(3).map_or(500_000, |n| n.parse().expect("a count"));
    let text = std::fs::read(file).expect("the file");
    let base: Vec<Vec<u8>> = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).map(<[u8]>::to_vec).collect();
    let lines: Vec<Vec<u8>> = base.iter().cycle().take(want).cloned().collect();
    let mean = lines.iter().map(Vec::len).sum::<usize>() / lines.len().max(1);
    println!("{} messages of {mean} bytes on average, lz4, acknowledged by the broker\n", lines.len());
    println!("| client | messages | wall s | messages/s | CPU µs a message |");
    println!("|---|---:|---:|---:|---:|");
    let broker2 = broker.clone();
    let lines2 = lines.clone();
    tokio::task::spawn_blocking(move || with_rdkafka(&broker2, &lines2)).await.expect("rdkafka");
    with_rskafka(broker, &lines).await;
}
