import Testing
import TetherCore

/// The machine contract itself (`Specs/machine-contract.md`), checked the same way on every
/// machine of the package (`ContractSubjects`): phases for every state name, the discipline of
/// transport generations, what `stop` and `reconnectNow` do, no attempt without a network, the
/// order of the lifecycle, the health, the timers, and how a call pending at the close ends. A
/// new machine joins by adding a subject; it passes these or is not a Tether machine.
@Suite struct MachineContractTests {
    // MARK: - States and phases

    /// Every state name is reachable, and its phase is the one its name says (the names every
    /// machine shares map to the phase of that name; a protocol's own steps to `connecting`); the
    /// health reports the same state and phase.
    @Test(arguments: ContractSubjects.allCases)
    func everyStateHasThePhaseItsNameSays(_ subject: ContractSubjects) throws {
        for name in subject.make().stateNames {
            let machine = subject.make()
            try #require(machine.reach(name), "\(subject): no script reaches '\(name)' (now \(machine.stateName))")
            #expect(machine.phase == expectedPhase(name), "\(subject): '\(name)' is in phase \(machine.phase)")
            let health = machine.health()
            #expect(health.state == name && health.phase == machine.phase, "\(subject): health says \(health.state)")
            // A session exists exactly while connected or resuming it.
            let hasSession = machine.phase == .connected || machine.phase == .resuming
            #expect(machine.hasSession == hasSession, "\(subject): '\(name)' session \(machine.hasSession)")
        }
    }

    // MARK: - Transport generations

    /// Every transport opened gets a new generation, larger than any before; input from a
    /// generation the machine abandoned (a lost link, an attempt replaced, before `stop` and
    /// `start`) changes nothing.
    @Test(arguments: ContractSubjects.allCases)
    func lateInputFromAnAbandonedTransportIsIgnored(_ subject: ContractSubjects) throws {
        let machine = subject.make()
        machine.connect()
        var log = machine.drain()
        let first = try #require(machine.currentGeneration)
        machine.cut()
        log += machine.drain()
        log += machine.advance(by: .seconds(1))
        let second = try #require(machine.currentGeneration)
        #expect(second > first)
        let state = machine.stateName
        machine.transportConnected(first)
        machine.transportReceived(Array("<junk {\"type\":7}\u{1E}".utf8), first)
        machine.transportClosed(first, TransportError(.connectionLost, "late"))
        #expect(machine.drain().isEmpty, "\(subject): late input of \(first) was used")
        #expect(machine.stateName == state)
        // After stop and start, the last generation is abandoned too.
        machine.stop()
        log += machine.drain()
        log += machine.advance(by: .seconds(5))
        machine.start()
        log += machine.drain()
        machine.transportConnected(second)
        machine.transportClosed(second, nil)
        #expect(machine.drain().isEmpty, "\(subject): input of \(second) after stop and start was used")
        // Opens name increasing generations.
        let opened = log.compactMap { if case .open(let generation) = $0 { generation } else { nil } }
        #expect(opened == opened.sorted() && Set(opened).count == opened.count, "\(subject): \(opened)")
    }

    // MARK: - stop and reconnectNow

    /// From every state, `stop` ends with `closed(nil)` as the last lifecycle change, closes every
    /// transport it opened, disarms every timer and leaves the machine disconnected; stopped
    /// again, it does nothing.
    @Test(arguments: ContractSubjects.allCases)
    func stopEndsEverythingFromEveryState(_ subject: ContractSubjects) throws {
        for name in subject.make().stateNames {
            let machine = subject.make()
            try #require(machine.reach(name))
            let wasDisconnected = name == "disconnected"
            machine.stop()
            var actions = machine.drain()
            // A closing handshake gets its close timeout at most.
            actions += machine.advance(by: .seconds(30))
            #expect(machine.phase == .disconnected, "\(subject): stop in '\(name)' left \(machine.stateName)")
            #expect(machine.pollTimeout() == nil, "\(subject): a timer armed after stop in '\(name)'")
            let lifecycle = actions.compactMap(\.lifecycleName)
            if wasDisconnected {
                #expect(actions.isEmpty)
            } else {
                #expect(lifecycle.last == "closed", "\(subject): stop in '\(name)' ended with \(lifecycle)")
                #expect(
                    actions.last { $0.lifecycleName == "closed" } == .lifecycle("closed", kind: nil, attempt: nil),
                    "\(subject): stop in '\(name)' closed with an error"
                )
            }
            if let generation = machine.currentGeneration {
                Issue.record("\(subject): still on \(generation) after stop in '\(name)'")
            }
            machine.stop()
            #expect(machine.drain().isEmpty, "\(subject): a second stop did something")
        }
    }

    /// `reconnectNow` starts an attempt at once from `reconnectWaiting` and `suspended`, with the
    /// back-off reset; disconnected, it does nothing.
    @Test(arguments: ContractSubjects.allCases)
    func reconnectNowStartsAnAttemptAtOnce(_ subject: ContractSubjects) throws {
        for name in ["reconnectWaiting", "suspended"] {
            let machine = subject.make()
            try #require(machine.reach(name))
            machine.reconnectNow()
            let actions = machine.drain()
            #expect(actions.contains { $0.isAttempt }, "\(subject): reconnectNow in '\(name)' did \(actions)")
            #expect(machine.phase == .connecting, "\(subject): reconnectNow in '\(name)' left \(machine.stateName)")
        }
        let idle = subject.make()
        idle.reconnectNow()
        #expect(idle.drain().isEmpty && idle.phase == .disconnected)
    }

    // MARK: - The network

    /// Without a network no attempt is made or counted, however long it lasts
    /// (`waitingForNetwork`); when it is back, one starts at once.
    @Test(arguments: ContractSubjects.allCases)
    func noAttemptWhileThePathIsDown(_ subject: ContractSubjects) {
        let machine = subject.make()
        machine.connect()
        _ = machine.drain()
        machine.networkChanged(.unavailable)
        _ = machine.drain()
        // The link goes (with stateful reconnect a resume would wait for the network as well).
        machine.cut()
        let lost = machine.drain()
        #expect(lost.contains(.lifecycle("waitingForNetwork", kind: nil, attempt: nil)), "\(subject): \(lost)")
        let meanwhile = machine.advance(by: .seconds(600))
        #expect(!meanwhile.contains { $0.isAttempt }, "\(subject): attempts without a network: \(meanwhile)")
        machine.networkChanged(NetworkPath(isAvailable: true, interfaces: ["wlan1"]))
        let back = machine.drain()
        #expect(back.contains { $0.isAttempt }, "\(subject): nothing when the network came back: \(back)")
    }

    // MARK: - The lifecycle

    /// A life with every kind of change (a login, a loss, a resume, a failed attempt, the policy
    /// giving up, `reconnectNow`, `stop`) reports the lifecycle in its grammar: up only once at a
    /// time, lost only when up, failed only when not, resumed only after a loss, attempts numbered
    /// from 1 in each outage, `closed` last.
    @Test(arguments: ContractSubjects.allCases)
    func theLifecycleFollowsItsGrammar(_ subject: ContractSubjects) throws {
        let machine = subject.make()
        var log: [ContractAction] = []
        machine.connect()
        log += machine.drain()
        // A loss the session survives: resumed.
        machine.cut()
        log += machine.drain()
        log += machine.advance(by: .seconds(1))
        if let generation = machine.lastGeneration, machine.phase == .connecting || machine.phase == .resuming {
            machine.transportConnected(generation)
            machine.serverLogin()
            log += machine.drain()
        }
        // An outage the policy gives up on.
        machine.cut()
        log += machine.drain()
        // Every attempt is refused (with stateful reconnect the resumes first, then the policy's).
        for _ in 0..<30 where machine.phase != .suspended {
            log += machine.advance(by: .seconds(1))
            if let generation = machine.currentGeneration {
                machine.transportClosed(generation, TransportError(.connectionFailed, "refused"))
                log += machine.drain()
            }
        }
        #expect(machine.phase == .suspended, "\(subject): \(machine.stateName) after refused attempts")
        machine.reconnectNow()
        log += machine.drain()
        if let generation = machine.lastGeneration {
            machine.transportConnected(generation)
            machine.serverLogin()
            log += machine.drain()
        }
        #expect(machine.phase == .connected)
        machine.stop()
        log += machine.drain()
        log += machine.advance(by: .seconds(30))
        try checkGrammar(log.filter { $0.lifecycleName != nil }, subject: subject)
        let names = log.compactMap(\.lifecycleName)
        for name in ["connected", "resumed", "connectionLost", "attemptFailed", "reconnecting", "suspended", "closed"] {
            #expect(names.contains(name), "\(subject): the life had no '\(name)': \(names)")
        }
    }

    func checkGrammar(_ changes: [ContractAction], subject: ContractSubjects) throws {
        var up = false
        var lostSinceUp = false
        var expectedAttempt = 1
        for (index, change) in changes.enumerated() {
            guard case .lifecycle(let name, let kind, let attempt) = change else { continue }
            let context = "\(subject): \(changes.map(\.description)) at \(index)"
            switch name {
            case "connected", "resumed":
                #expect(!up, "up twice: \(context)")
                if name == "resumed" { #expect(lostSinceUp, "resumed without a loss: \(context)") }
                up = true
                lostSinceUp = false
                expectedAttempt = 1
            case "connectionLost":
                #expect(up, "lost while not up: \(context)")
                #expect(kind != nil)
                up = false
                lostSinceUp = true
                expectedAttempt = 1
            case "attemptFailed":
                #expect(!up, "an attempt failed while up: \(context)")
                #expect(kind != nil)
            case "reconnecting":
                #expect(!up, "reconnecting while up: \(context)")
                #expect(attempt == expectedAttempt, "attempt \(String(describing: attempt)): \(context)")
                expectedAttempt += 1
            case "waitingForNetwork", "suspended":
                #expect(!up, "\(name) while up: \(context)")
                if name == "suspended" { expectedAttempt = 1 }
            case "closed":
                #expect(index == changes.count - 1, "something after closed: \(context)")
                up = false
            default:
                Issue.record("an unknown lifecycle change \(name)")
            }
        }
    }

    // MARK: - Health and timers

    /// The health follows the machine: state and phase, time online, traffic, losses.
    @Test(arguments: ContractSubjects.allCases)
    func theHealthFollowsTheMachine(_ subject: ContractSubjects) {
        let machine = subject.make()
        #expect(machine.health().phase == .disconnected)
        machine.connect()
        _ = machine.drain()
        machine.advance(by: .seconds(5))
        var health = machine.health()
        #expect(health.phase == .connected && health.state == "connected")
        #expect(
            (health.timeOnline ?? .zero) >= .seconds(5),
            "\(subject): online \(String(describing: health.timeOnline))"
        )
        #expect(health.bytesSent > 0 && health.bytesReceived > 0)
        #expect(health.transport != nil)
        machine.cut()
        _ = machine.drain()
        health = machine.health()
        #expect(health.phase == machine.phase && health.state == machine.stateName)
        #expect(health.reconnectAttempts >= 1 || machine.phase == .resuming, "\(subject): \(health)")
        #expect(health.timeOnline == nil || machine.phase == .connected)
    }

    /// After every input the timers are armed as the phase needs: never in the past; a deadline
    /// while connecting (the attempt's), connected (the keep-alive), resuming and waiting to
    /// reconnect with a network (the delay); none while disconnected or suspended.
    @Test(arguments: ContractSubjects.allCases)
    func timersAreArmedAfterEveryInput(_ subject: ContractSubjects) {
        let machine = subject.make()
        func check(_ step: String) {
            let timeout = machine.pollTimeout()
            if let timeout { #expect(timeout > machine.now, "\(subject): a timer in the past after \(step)") }
            switch machine.phase {
            case .connecting, .connected, .resuming, .reconnectWaiting, .closing:
                #expect(timeout != nil, "\(subject): no timer in \(machine.stateName) after \(step)")
            case .disconnected, .suspended:
                #expect(timeout == nil, "\(subject): a timer in \(machine.stateName) after \(step)")
            }
        }
        check("nothing")
        machine.start()
        _ = machine.drain()
        check("start")
        machine.transportConnected(machine.lastGeneration!)
        _ = machine.drain()
        check("the transport connected")
        machine.serverLogin()
        _ = machine.drain()
        check("the login")
        for _ in 0..<3 {
            machine.advance(by: .seconds(31))
            check("time passing")
        }
        machine.cut()
        _ = machine.drain()
        check("a loss")
        machine.advance(by: .seconds(1))
        check("the reconnect delay")
        machine.stop()
        _ = machine.drain()
        machine.advance(by: .seconds(30))
        check("stop")
    }

    // MARK: - Calls pending at the close

    /// A call the server has not answered when the app stops the connection (every kind of call:
    /// an iq request; an invocation, a stream) ends exactly once, with an error of kind
    /// `canceled`, typed (the same kind on every protocol).
    @Test(arguments: ContractSubjects.allCases)
    func aCallPendingAtStopEndsOnceAsCanceled(_ subject: ContractSubjects) throws {
        let machine = subject.make()
        machine.connect()
        _ = machine.drain()
        let ids = machine.startPendingCalls()
        #expect(!ids.isEmpty)
        machine.stop()
        var actions = machine.drain()
        actions += machine.advance(by: .seconds(30))
        for id in ids {
            let ends = actions.filter { if case .callEnded(id, _) = $0 { true } else { false } }
            #expect(ends == [.callEnded(id, kind: "canceled")], "\(subject): call \(id): \(actions)")
        }
    }
}
