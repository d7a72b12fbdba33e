import TetherCore

/// The bookkeeping of stateful reconnect (hub protocol version 2), as the shipping ASP.NET Core
/// clients implement it (`MessageBuffer`): sequence numbers for the five trackable message types
/// in both directions, the buffer of sent messages not yet acknowledged, and duplicate detection
/// on replay.
struct StatefulReconnectBuffer: Sendable {
    struct Sent: Sendable {
        var sequenceId: Int64
        var bytes: [UInt8]
    }

    /// The byte limit of unacknowledged sent messages (back-pressure beyond it).
    let capacity: Int
    /// Sent trackable messages not yet acknowledged, oldest first (trimmed in O(1) amortised).
    private(set) var unacknowledged = FIFOQueue<Sent>()
    private(set) var bufferedBytes = 0
    /// The sequence id of the last trackable message sent.
    private(set) var totalSent: Int64 = 0

    /// The id the next received trackable message gets.
    private(set) var nextReceiveId: Int64 = 1
    /// The highest id received and processed.
    private(set) var latestReceived: Int64 = 0
    /// The highest id acknowledged to the peer.
    private(set) var latestAcknowledged: Int64 = 0
    /// After a transport loss: incoming messages are ignored until the peer's Sequence arrives.
    private(set) var waitingForSequence = false

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Whether another message may be sent (otherwise the caller waits for acknowledgements).
    var hasRoom: Bool { bufferedBytes < capacity }

    /// Records a sent trackable message.
    mutating func sent(_ bytes: [UInt8]) {
        totalSent += 1
        unacknowledged.append(Sent(sequenceId: totalSent, bytes: bytes))
        bufferedBytes += bytes.count
    }

    /// The peer acknowledged everything up to `sequenceId`; returns whether room was freed from a
    /// full buffer.
    mutating func acknowledged(upTo sequenceId: Int64) -> Bool {
        let wasFull = !hasRoom
        var count = 0
        for message in unacknowledged.elements {
            guard message.sequenceId <= sequenceId else { break }
            bufferedBytes -= message.bytes.count
            count += 1
        }
        unacknowledged.removeFirst(count)
        return wasFull && hasRoom
    }

    /// Classifies a received trackable message: true to process it, false for a duplicate (or
    /// one received while waiting for the peer's Sequence).
    mutating func shouldProcessReceived() -> Bool {
        if waitingForSequence { return false }
        let id = nextReceiveId
        nextReceiveId += 1
        if id <= latestReceived { return false }
        latestReceived = id
        return true
    }

    /// Whether an Ack is owed to the peer.
    var needsAck: Bool { latestReceived > latestAcknowledged }

    /// Marks the current state acknowledged and returns the id to send in the Ack.
    mutating func acknowledge() -> Int64 {
        latestAcknowledged = latestReceived
        return latestReceived
    }

    /// The transport was lost: wait for the peer's Sequence before processing anything.
    mutating func transportLost() {
        waitingForSequence = true
    }

    /// The Sequence to send after reconnecting: the oldest unacknowledged id, or the next id if
    /// everything was acknowledged (the code's behaviour, not the spec text's; §10).
    var resumeSequenceId: Int64 { unacknowledged.elements.first?.sequenceId ?? totalSent + 1 }

    /// The peer's Sequence arrived. Returns false for the fatal "greater than received" case.
    mutating func peerSequence(_ sequenceId: Int64) -> Bool {
        guard sequenceId <= nextReceiveId else { return false }
        nextReceiveId = sequenceId
        waitingForSequence = false
        return true
    }
}
