import Testing
import TetherCore
import TetherXMPP

/// The values the machine and the driver move on every input stay a few words: an event, an
/// action and an error are moved (copied byte for byte) several times per stanza, and at 160
/// bytes each move was a call to `memmove` (76 per ping); the large, rare payloads are boxed
/// (`indirect` cases, the error's details, the transport request's kind) instead.
struct ValueSizeTests {
    @Test func eventsActionsAndErrorsStaySmall() {
        typealias Machine = XMPPClientMachine
        #expect(MemoryLayout<XMPPClientError>.size <= 40)
        #expect(MemoryLayout<Machine.IQOutcome>.size <= 40)
        #expect(MemoryLayout<Machine.Event>.size <= 64)
        #expect(MemoryLayout<ConnectionAction<Machine.Request, Machine.Event>>.size <= 64)
        #expect(MemoryLayout<TransportRequest>.size <= 40)
    }

    /// The boxed details read back as given, and take part in equality.
    @Test func anErrorsDetailsReadBackAndCompare() {
        let stanzaError = StanzaError(type: .cancel, condition: .conflict)
        let withDetails = XMPPClientError(
            .bindFailed,
            "taken",
            saslCondition: "not-authorized",
            stanzaError: stanzaError
        )
        #expect(withDetails.stanzaError == stanzaError)
        #expect(withDetails.saslCondition == "not-authorized")
        #expect(withDetails.streamError == nil)
        let plain = XMPPClientError(.bindFailed, "taken")
        #expect(plain.stanzaError == nil && plain.saslCondition == nil && plain.streamError == nil)
        #expect(plain != withDetails)
        #expect(
            withDetails
                == XMPPClientError(.bindFailed, "taken", saslCondition: "not-authorized", stanzaError: stanzaError)
        )
        #expect(Set([plain, withDetails, plain]).count == 2)
    }
}
