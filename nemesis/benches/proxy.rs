//! Cost of the proxy mesh: one-line echo round trip direct vs through a link proxy, and
//! bulk throughput through a proxy.

use std::net::SocketAddr;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use splitbrain_nemesis::proxy::ProxyMesh;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::runtime::Runtime;

/// Echoes every byte back.
async fn echo_server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let _ = sock.set_nodelay(true);
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = sock.read(&mut buf).await {
                    if n == 0 || sock.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    addr
}

fn bench(c: &mut Criterion) {
    let rt = Runtime::new().unwrap();
    let (direct, mesh) = rt.block_on(async {
        let a = echo_server().await;
        let b = echo_server().await;
        (b, ProxyMesh::start(vec![a, b]).await.unwrap())
    });
    let mut group = c.benchmark_group("proxy");
    for (name, addr) in [
        ("rtt_direct", direct),
        ("rtt_via_proxy", mesh.link_addr(0, 1)),
    ] {
        let mut lines = rt.block_on(async {
            let s = TcpStream::connect(addr).await.unwrap();
            s.set_nodelay(true).unwrap();
            BufReader::new(s)
        });
        group.bench_function(name, |bch| {
            bch.iter(|| {
                rt.block_on(async {
                    lines.get_mut().write_all(b"ping\n").await.unwrap();
                    let mut line = String::new();
                    lines.read_line(&mut line).await.unwrap();
                })
            })
        });
    }
    let block = vec![b'x'; 1 << 20];
    group.throughput(Throughput::Bytes(block.len() as u64));
    group.sample_size(20);
    let mut s = rt
        .block_on(TcpStream::connect(mesh.link_addr(0, 1)))
        .unwrap();
    group.bench_function("throughput_1MiB_via_proxy", |bch| {
        bch.iter(|| {
            rt.block_on(async {
                let (mut r, mut w) = s.split();
                let mut back = vec![0u8; block.len()];
                let (wr, rd) = tokio::join!(w.write_all(&block), r.read_exact(&mut back));
                wr.unwrap();
                rd.unwrap();
            })
        })
    });
    group.finish();
    rt.block_on(mesh.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
