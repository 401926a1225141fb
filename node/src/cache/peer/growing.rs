//! Reading a file that may still be growing: a verified copy is read
//! straight through (a short read is an error: it must hold every byte);
//! a partial is followed as the fetch writing it appends, and given up when
//! it stops growing for [`STALL`] or is deleted (a fetch whose checksum
//! failed removes it). A partial renamed into place stays the same open
//! file, so a transfer that started on it finishes on the verified copy.
use std::os::unix::fs::MetadataExt;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// How long a partial may stop growing before the transfer is cut (the
/// receiver's own stall limit is 20 s: this ends first and says why).
pub const STALL: Duration = Duration::from_secs(15);
/// Between two looks at a partial that has no new bytes.
const POLL: Duration = Duration::from_millis(20);

pub struct Reader {
    file: tokio::fs::File,
    growing: bool,
}

impl Reader {
    pub fn new(file: tokio::fs::File, growing: bool) -> Reader {
        Reader { file, growing }
    }

    /// Up to `max` next bytes (at least one).
    pub async fn next_chunk(&mut self, max: usize) -> std::io::Result<Vec<u8>> {
        let mut buf = vec![0u8; max];
        let mut idle = Duration::ZERO;
        loop {
            let n = self.file.read(&mut buf).await?;
            if n > 0 {
                buf.truncate(n);
                return Ok(buf);
            }
            if !self.growing {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the copy is shorter than it was",
                ));
            }
            if self.file.metadata().await?.nlink() == 0 {
                return Err(std::io::Error::other(
                    "the copy being fetched here was deleted (its checksum failed)",
                ));
            }
            if idle >= STALL {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the copy being fetched here grew no further for {}s",
                        STALL.as_secs()
                    ),
                ));
            }
            tokio::time::sleep(POLL).await;
            idle += POLL;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[actix_rt::test]
    async fn a_growing_file_is_followed_and_a_deleted_one_given_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.partial");
        let mut w = std::fs::File::create(&path).unwrap();
        w.write_all(b"abc").unwrap();
        let mut r = Reader::new(tokio::fs::File::open(&path).await.unwrap(), true);
        assert_eq!(r.next_chunk(10).await.unwrap(), b"abc");
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            w.write_all(b"de").unwrap();
            w
        });
        // Nothing yet: it waits for the writer's next bytes.
        assert_eq!(r.next_chunk(10).await.unwrap(), b"de");
        drop(writer.join().unwrap());
        std::fs::remove_file(&path).unwrap();
        let e = r.next_chunk(10).await.unwrap_err();
        assert!(e.to_string().contains("deleted"), "{e}");
    }

    #[actix_rt::test]
    async fn a_verified_copy_that_ends_early_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("copy");
        std::fs::write(&path, b"ab").unwrap();
        let mut r = Reader::new(tokio::fs::File::open(&path).await.unwrap(), false);
        assert_eq!(r.next_chunk(10).await.unwrap(), b"ab");
        assert!(r.next_chunk(10).await.is_err());
    }
}
