"""What the Neuron profile schema 7.4.0 documents: the tables opscope reads, their columns, and
the runtime and hardware event names the mapping relies on."""

from __future__ import annotations

SCHEMA_VERSION = "7.4.0"
WARNING_PREFIX = "neuron: "

# Columns of the 7.4.0 schema for the tables opscope reads (``*`` = required).  Source:
# aws-neuron-sdk tools/neuron-explorer/profile-schema-reference.rst.
_SCHEMA_TEXT: dict[str, str] = {
    "SystemProfileEvents": """id* name* start_ts* end_ts* duration_ns* trace_event_source*
        instance_id* process_id* thread_id* nc_idx pcore_idx worker_gid flow_id
        framework_stream_id extra_attributes_json""",
    "SystemProfileMetadata": """first_ts* last_ts* first_ts_ns* last_ts_ns* ntff_version*
        hbm_capacity_bytes*""",
    "DeviceProfileList": "device_profile_name* instance_id* process_id* nc_id* session_id model_id",
    "Metadata": """profile_schema_version* ntff_version* num_physical_cores* vnc_enabled*
        first_hw_timestamp* last_hw_timestamp* first_ts* last_ts* dma_ddr_bandwidth*
        num_dma_engines_per_neuroncore* hbm_ddr_bandwidth* tensor_engine_num_rows*
        tensor_engine_num_cols* tensor_engine_clock_freq* vector_engine_clock_freq*
        vector_engine_num_channels* scalar_engine_clock_freq* scalar_engine_num_channels*
        gpsimd_engine_clock_freq* gpsimd_engine_num_channels* neuroncore_clock_freq*
        ticks_per_nanosec* instance_type runtime_version collectives_version driver_version
        explorer_version compiler_version neuroncore_idx neuron_device_idx ultraserver_id
        ultraserver_type ultraserver_size ultraserver_instance_index s3_bucket_path
        profile_name explorer_build_time is_simulation""",
    "ExecutionInfo": """execution_index* neff_name execution_start_ts execution_end_ts
        num_subgraphs row_count""",
    "ActiveTime": "start_ts* end_ts* engine* pcore_idx* duration_ns*",
    "Warning": "message* category*",
    "Instruction": """start_ts* end_ts* duration_ns* engine* timeline_track pcore_idx opcode*
        operands* compiler_opcode compiler_operands id* pc* compiler_pc penguin_id raw_penguin_id
        bir_id* raw_bir_id bir_instruction_name kernel_instruction_name crc_in crc_out
        evt_wait_time_ns hlo_attrs hlo_name raw_hlo_id raw_framework_id layer stack_frame_ids
        nki_source_location bir_debug_info_source_location dma_trigger_start_ts
        dma_trigger_end_ts dma_wait_time_ns instruction_chain hbm_read_bytes hbm_write_bytes
        sbuf_read_bytes sbuf_write_bytes spill_save_bytes spill_reload_bytes psum_read_bytes
        psum_write_bytes psum_read_sbuf_write_bytes input_queue_bytes output_queue_bytes
        weight_queue_bytes performance_mode tensor_instruction_type tensor_elements raw_flops
        adjusted_flops tensor_elements_transpose flops_transpose adjusted_flops_transpose
        scalar_activation_fn""",
    "DmaPacket": """start_ts* end_ts* duration_ns* pcore_idx id* packet_idx*
        packet_aggregation_id* engine_idx read_bytes* write_bytes* transfer_bytes* throughput*
        queue_type* variable queue_name queue_idx crc*""",
    "OpcodeSummary": """engine* opcode* instruction_count* instruction_time_ns* active_time_ns*
        active_time_percent*""",
    "NeffHeader": """network_name uuid hash enabled_features header_size data_size major_version
        minor_version package_version build_version cc_participant_count neuroncore_count
        logical_neuroncore_count pcore_count_per_lnc""",
}


def _parse_schema(text: str) -> tuple[frozenset[str], frozenset[str]]:
    names = text.split()
    required = frozenset(n.rstrip("*") for n in names if n.endswith("*"))
    return required, frozenset(n.rstrip("*") for n in names)


SCHEMA: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    t: _parse_schema(x) for t, x in _SCHEMA_TEXT.items()
}
# Tables recognising a folder as a device profile.
DEVICE_TABLES = ("Metadata", "Instruction", "ActiveTime", "Summary", "ExecutionInfo")
SYSTEM_TABLE = "SystemProfileEvents"

# Hardware event names (NEURON.md section 5).
HW_EXEC = "nc_exec_running"
HW_COMM = ("cc_running",)
# Runtime execute calls, most specific first: the launch of a hardware execution.
RT_EXECUTE = ("nrta_execute_schedule", "nrt_execute", "runtime_execute", "device_exec")
