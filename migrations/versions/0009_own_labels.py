"""add the repository's own labels beside the kind: confirmed examples per issue, decisions per prediction

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 06:45:00

"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Upgrade schema."""
    op.create_table('own_label_examples',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('issue_id', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=255), nullable=False),
    sa.Column('confirmed_by', sa.String(length=255), nullable=True),
    sa.Column('confirmed_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['issue_id'], ['issues.id'], name=op.f('fk_own_label_examples_issue_id_issues')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_own_label_examples')),
    sa.UniqueConstraint('issue_id', 'label', name=op.f('uq_own_label_examples_issue_id'))
    )
    with op.batch_alter_table('own_label_examples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_own_label_examples_issue_id'), ['issue_id'], unique=False)
    op.create_table('own_label_decisions',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('prediction_id', sa.Integer(), nullable=False),
    sa.Column('label', sa.String(length=255), nullable=False),
    sa.Column('score', sa.Float(), nullable=False),
    sa.Column('threshold', sa.Float(), nullable=True),
    sa.Column('outcome', sa.String(length=32), nullable=False),
    sa.Column('decision', sa.String(length=16), nullable=True),
    sa.Column('decided_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['prediction_id'], ['predictions.id'],
                            name=op.f('fk_own_label_decisions_prediction_id_predictions')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_own_label_decisions'))
    )
    with op.batch_alter_table('own_label_decisions', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_own_label_decisions_prediction_id'), ['prediction_id'],
                              unique=False)


def downgrade() -> None:
    """Downgrade schema."""
    with op.batch_alter_table('own_label_decisions', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_own_label_decisions_prediction_id'))
    op.drop_table('own_label_decisions')
    with op.batch_alter_table('own_label_examples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_own_label_examples_issue_id'))
    op.drop_table('own_label_examples')
