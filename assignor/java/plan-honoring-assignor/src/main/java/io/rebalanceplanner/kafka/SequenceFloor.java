package io.rebalanceplanner.kafka;

import java.io.IOException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/** The plan sequence floor in {@code rebalance.planner.state.dir}, or nothing when that setting is not given. */
public final class SequenceFloor {
    private static final Logger LOG = LoggerFactory.getLogger(SequenceFloor.class);

    private final SequenceFile file;
    private Long kept;
    private boolean damaged;

    private SequenceFloor(SequenceFile file) {
        this.file = file;
    }

    public static SequenceFloor of(PlannerSettings settings) {
        return new SequenceFloor(settings.stateDir() == null ? null
                : new SequenceFile(settings.stateDir(), settings.applicationId()));
    }

    /**
     * The floor kept, or null.
     *
     * @throws PlansUnreadableException when the file is damaged: the leader must not guess a floor
     */
    public Long read() throws PlansUnreadableException {
        if (file == null) {
            return null;
        }
        try {
            kept = file.read();
            return kept;
        } catch (IOException e) {
            damaged = true; // left for an operator to look at, never overwritten
            throw new PlansUnreadableException("the plan sequence floor: " + e.getMessage(), e);
        }
    }

    /** Keep {@code sequence} if it is higher than the floor read; a failure only costs the floor after restart. */
    public void keep(Long sequence) {
        if (file == null || damaged || sequence == null || (kept != null && sequence <= kept)) {
            return;
        }
        try {
            file.write(sequence);
            kept = sequence;
        } catch (IOException e) {
            LOG.error("plan sequence {} not kept in {}: {}", sequence, file.path(), e.toString());
        }
    }
}
